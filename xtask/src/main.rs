//! `cargo xtask`: project automation.
//!
//! - `cargo xtask ci` — every check CI runs, in order, with the time each stage took: installs
//!   the wasm32 target and the rustfmt/clippy components when missing, then fmt check, clippy
//!   (native and wasm32, `-D warnings`), the schema crate built `no_std` for wasm32, all native
//!   tests, the dependency guard, the page built by xtask's builder ([`web`]) and by trunk (pinned
//!   tools installed under [`tools::tools_root`] when missing; trunk's install starts on a
//!   background thread at the first stage), `trunk serve` answering for the page and its wasm,
//!   a check that both builds hold the same files byte for byte, and the browser end-to-end tests in Debian's headless chromium (installed with
//!   apt when missing).
//!   Between the native tests and the dependency guard, a fuzz smoke stage runs every cargo-fuzz
//!   target in `fuzz/` for 20 s (`SKIPPED` without a nightly toolchain; a crash fails CI).
//! - `cargo xtask fuzz [--seconds N] [TARGET...]` — seed the fuzz corpora from
//!   `tests/fixtures` and run the targets (all by default) for N s each (default 20).
//! - `cargo xtask package` — `cargo package` of every crate meant for crates.io (schema, capture,
//!   cli; the rest are `publish = false`), each built from its package and checked against
//!   crates.io's 10 MiB limit ([`package`]); CI runs it after the dependency guard.
//! - `cargo xtask deps` — only the dependency guard (`deps.rs`: denied crates per package, no
//!   import circle between the modules of a crate).
//! - `cargo xtask demo [--port N] [--no-serve]` — capture a fresh training-step trace of a
//!   candle-transformers Llama with the `train_llama` example (`target/demo/train.trace6.jsonl`)
//!   and an inference profile with `serve_batched` (`target/demo/infer.profile.jsonl`: two
//!   engines serving requests in batches with a KV-cache budget), summarise
//!   both with the CLI, build
//!   the viewer and serve it with `candle-trace view --page web/dist` (the same server as any
//!   `view`) on 127.0.0.1 with the trace open. It adds the
//!   wasm32 target and installs wasm-opt and wasm-bindgen when missing, and builds the page with
//!   xtask's builder ([`web`], no trunk); the installs and the viewer's wasm build run on
//!   background threads beside the examples. Every step prints its time ([`steps`]).
//! - `cargo xtask page [--embed]` — only the page, into `web/dist`, with xtask's builder; with
//!   `--embed` also into `cli/page/`, the page the CLI carries ([`embed`]). CI's stage
//!   `embedded page is current` (also `page --check-embed`) rebuilds it with the rustc
//!   `cli/page/BUILD` names and fails, saying how to refresh it, when a file differs.
//! - `cargo xtask fresh [--toolchain NAME]` — the cold demo reproduced here (fresh clone, empty
//!   tools folder, wasm32 target removed), then a warm one, with every step's time ([`fresh`]).

mod bench;
mod deps;
mod embed;
mod fresh;
mod fuzz;
mod markers;
mod package;
mod serve;
mod steps;
mod tools;
mod web;

use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

const WASM: &str = "wasm32-unknown-unknown";

/// Where CI's trunk build goes, relative to `web/` (web/dist is xtask's build).
const TRUNK_DIST: &str = "../target/trunk-dist";
/// Where CI's `trunk serve` check builds, relative to `web/`.
const TRUNK_SERVE_DIST: &str = "../target/trunk-serve-dist";

/// Cargo arguments that select the release `candle-trace` CLI.
const CLI_BIN: &[&str] = &[
    "--release",
    "-q",
    "-p",
    "candle-trace-cli",
    "--bin",
    "candle-trace",
];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("deps") => deps::guard(),
        Some("demo") => demo(&args[1..]),
        Some("fuzz") => fuzz::run(&args[1..]),
        Some("fresh") => fresh::run(&args[1..]),
        // What `cargo publish` would upload, built from the packages (CI runs it).
        Some("package") => package::check(),
        // web/dist without trunk (what the demo serves); with --embed also into cli/page/,
        // the page the CLI carries.
        Some("page") => match args.get(1).map(String::as_str) {
            None => web::build_viewer(),
            Some("--embed") => embed::embed(),
            // CI's check alone: is cli/page/ what a fresh build gives?
            Some("--check-embed") => embed::check(),
            Some(other) => bail!("unknown page option {other} (use --embed or --check-embed)"),
        },
        // Install the pinned web tools and the browser ahead of time (ci and demo do it too).
        Some("bench") => bench::bench(&args[1..]),
        Some("tools") => tools::ensure_web_tools().and_then(|()| tools::ensure_browser()),
        _ => {
            eprintln!(
                "usage: cargo xtask <ci|deps|demo|fresh|page [--embed|--check-embed]|package|fuzz|tools|bench [--big] [--runs N] [--only PARTS] [--tables]>"
            );
            std::process::exit(2);
        }
    }
}

fn ci() -> Result<()> {
    let started = Instant::now();
    // Trunk's install is the longest (16 min on 2 cores) and needed only near the end.
    let trunk_install = std::cell::Cell::new(Some(
        steps::Steps::default().spawn("install trunk", || tools::ensure(&tools::Tool::Trunk)),
    ));
    let mut timings: Vec<(&str, f64)> = Vec::new();
    let mut stage = |name: &'static str, f: &dyn Fn() -> Result<()>| -> Result<()> {
        eprintln!("\n==> {name}");
        let t = Instant::now();
        let result = f();
        let secs = t.elapsed().as_secs_f64();
        timings.push((name, secs));
        eprintln!(
            "<== {name}: {} in {secs:.1} s",
            if result.is_ok() { "ok" } else { "FAILED" }
        );
        result.with_context(|| format!("stage `{name}` failed"))
    };
    stage("toolchain", &|| {
        run("rustup", &["component", "add", "rustfmt", "clippy"])?;
        run("rustup", &["target", "add", WASM])?;
        // node/npm first: wasm-opt comes from npm (without it, a 13-minute cargo build).
        tools::ensure_browser()
    })?;
    stage("fmt", &|| {
        cargo(&["fmt", "--all", "--", "--check"])?;
        // fuzz/ is outside the workspace.
        cargo(&["fmt", "--manifest-path", "fuzz/Cargo.toml", "--", "--check"])
    })?;
    stage("no merge-conflict markers", &markers::check)?;
    stage("clippy (native)", &|| {
        cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ])
    })?;
    stage("clippy (wasm32)", &|| {
        let clippy = |args: &[&str]| {
            let mut all = vec!["clippy"];
            all.extend_from_slice(args);
            all.extend_from_slice(&["--target", WASM, "--", "-D", "warnings"]);
            cargo(&all)
        };
        clippy(&["-p", "candle-trace-schema"])?;
        // The viewer's tests too: those that need a native-only crate (proptest) are left out
        // on wasm32 by `cfg`, and this keeps them so. (The schema's tests cannot build for
        // wasm32: proptest's random source does not.)
        clippy(&["-p", "candle-trace-viewer", "--all-targets"])?;
        clippy(&["-p", "candle-trace-schema", "--no-default-features"])
    })?;
    stage("schema no_std wasm32 build", &|| {
        cargo(&[
            "build",
            "-p",
            "candle-trace-schema",
            "--no-default-features",
            "--target",
            WASM,
        ])
    })?;
    stage("tests", &|| {
        cargo(&["test", "--workspace", "--all-features"])?;
        // The independent oracle must still produce the committed `expected/` files that the
        // Rust readers are tested against.
        run("python3", &["tests/fixtures/oracle.py", "--check"])
    })?;
    stage("fuzz smoke", &|| fuzz::smoke(fuzz::SMOKE_SECONDS, &[]))?;
    stage("dependency guard", &deps::guard)?;
    stage("crates ready to publish (cargo package)", &package::check)?;
    stage("viewer build (xtask)", &web::build_viewer)?;
    stage("embedded page is current (cli/page)", &embed::check)?;
    stage("viewer build (trunk)", &|| {
        if let Some(install) = trunk_install.take() {
            install.join()?;
        }
        tools::trunk_build(TRUNK_DIST)
    })?;
    stage("trunk serve (development build)", &|| {
        tools::trunk_serve_check(TRUNK_SERVE_DIST, std::time::Duration::from_secs(1200))
    })?;
    stage("xtask and trunk pages agree", &|| {
        let trunk_dist = std::path::Path::new("web").join(TRUNK_DIST);
        let diffs = web::compare_trees(&std::path::Path::new("web").join("dist"), &trunk_dist)?;
        if !diffs.is_empty() {
            bail!(
                "web/dist (xtask) and {} (trunk) differ:\n{}",
                trunk_dist.display(),
                diffs.join("\n")
            );
        }
        eprintln!(
            "web/dist and {}: the same files, byte for byte",
            trunk_dist.display()
        );
        Ok(())
    })?;
    stage("browser end-to-end tests", &browser_tests)?;
    eprintln!("\nstage timings:");
    for (name, secs) in &timings {
        eprintln!("  {name:<28} {secs:>7.1} s");
    }
    eprintln!(
        "  {:<28} {:>7.1} s",
        "total",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The playwright-core tests in `tests/e2e` against `web/dist`, in Debian's chromium.
fn browser_tests() -> Result<()> {
    tools::ensure_browser()?;
    cargo(&[&["build"], CLI_BIN].concat())?;
    let e2e = std::path::Path::new("tests").join("e2e");
    npm_ci(&e2e)?;
    let bin =
        std::fs::canonicalize("target/release/candle-trace").context("the CLI was not built")?;
    let status = Command::new("node")
        .arg("--test")
        .args(e2e_test_files(&e2e)?)
        .current_dir(&e2e)
        .env("CANDLE_TRACE_BIN", bin)
        .env("CHROMIUM", "/usr/bin/chromium")
        .status()
        .context("cannot start node")?;
    if !status.success() {
        bail!("browser tests failed ({status})");
    }
    Ok(())
}

/// `npm ci` in `dir` unless its node_modules already has every pinned package.
fn npm_ci(dir: &std::path::Path) -> Result<()> {
    let modules = dir.join("node_modules");
    if ["playwright-core", "speedscope"]
        .iter()
        .all(|p| modules.join(p).join("package.json").exists())
    {
        return Ok(());
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .context("cannot start npm")?;
    if !status.success() {
        bail!("npm ci failed ({status})");
    }
    Ok(())
}

/// Every `*.test.mjs` in `dir`, sorted.
fn e2e_test_files(dir: &std::path::Path) -> Result<Vec<String>> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".test.mjs"))
        .collect();
    files.sort();
    Ok(files)
}

fn demo(args: &[String]) -> Result<()> {
    let mut port: u16 = 8000;
    let mut serve_page = true;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--port" => {
                port = it
                    .next()
                    .and_then(|p| p.parse().ok())
                    .context("--port needs a number")?
            }
            "--no-serve" => serve_page = false,
            other => bail!("unknown demo option {other} (use --port N, --no-serve)"),
        }
    }
    let started = Instant::now();
    let steps = steps::Steps::default();
    steps.heartbeat(std::time::Duration::from_secs(60));
    // The page does not depend on the examples: install its tools, build its wasm and assemble
    // it in the background, so that all of it overlaps the examples' build.
    let page = if serve_page {
        steps.run("wasm32 target", tools::ensure_wasm32_target)?;
        let page_tools = steps.spawn(
            "install wasm-opt and wasm-bindgen",
            tools::ensure_page_tools,
        );
        let wasms = steps.spawn("build the viewer's wasm (cargo)", || {
            web::build_wasm(
                std::path::Path::new("web"),
                Some(&steps::log_path("viewer-wasm")),
            )
        });
        let assembler = steps.clone();
        Some(std::thread::spawn(move || -> Result<std::path::PathBuf> {
            page_tools.join()?;
            let wasms = wasms.join()?;
            let web_dir = std::path::Path::new("web");
            let dist = web_dir.join("dist");
            assembler.run("assemble the page (wasm-bindgen, wasm-opt, assets)", || {
                web::assemble(web_dir, &wasms, &dist)
            })?;
            Ok(dist)
        }))
    } else {
        None
    };
    let dir = std::path::Path::new("target").join("demo");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let train = dir.join("train.trace6.jsonl");
    let train = train.to_str().context("the demo path is not UTF-8")?;
    let infer = dir.join("infer.profile.jsonl");
    let infer = infer.to_str().context("the demo path is not UTF-8")?;
    for (example, out) in [("train_llama", train), ("serve_batched", infer)] {
        steps.run(&format!("build and run the {example} example"), || {
            cargo(&[
                "run",
                "--release",
                "-q",
                "-p",
                "candle-trace-capture",
                "--features",
                "candle",
                "--example",
                example,
                "--",
                "--out",
                out,
            ])
        })?;
    }
    let cli = [&["run"], CLI_BIN, &["--"]].concat();
    steps.run("build the CLI and summarise both files", || {
        for args in [
            vec!["summary", train],
            vec!["query", train, "--kind", "modules", "--limit", "16"],
            vec!["query", train, "--kind", "ops", "--limit", "8"],
            vec!["query", train, "--kind", "gradients", "--limit", "4"],
            vec!["summary", infer],
            vec!["query", infer, "--kind", "requests"],
            vec!["query", infer, "--kind", "iterations", "--limit", "12"],
            vec!["query", infer, "--kind", "resources", "--limit", "8"],
            vec!["query", infer, "--kind", "modules", "--limit", "8"],
            vec!["findings", infer],
        ] {
            let mut all: Vec<&str> = cli.to_vec();
            all.extend(args);
            cargo(&all)?;
        }
        Ok(())
    })?;
    eprintln!("\ntrace written to {train}\ninference profile written to {infer}");
    let Some(page) = page else {
        steps.print_summary(started.elapsed().as_secs_f64());
        return Ok(());
    };
    let dist = page
        .join()
        .map_err(|_| anyhow::anyhow!("building the page panicked"))??;
    steps.print_summary(started.elapsed().as_secs_f64());
    // The one way to open a trace: `candle-trace view`, here with the page just built.
    let cli = web::target_dir()?.join("release").join("candle-trace");
    let cli = cli.to_str().context("the target path is not UTF-8")?;
    let dist = dist.to_str().context("the page path is not UTF-8")?;
    let port = port.to_string();
    eprintln!("\nviewer: `candle-trace view` serves web/dist and the trace on 127.0.0.1 only (the address follows; Ctrl-C stops)");
    exec(
        cli,
        &["view", train, "--port", &port, "--no-open", "--page", dist],
    )
}

/// Become `program` (Unix: the process is replaced, so whoever stops the demo stops the
/// server); elsewhere run it to its end.
fn exec(program: &str, args: &[&str]) -> Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        let err = Command::new(program).args(args).exec();
        Err(err).with_context(|| format!("cannot start {program}"))
    }
    #[cfg(not(unix))]
    {
        run(program, args)
    }
}

fn env_cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn cargo(args: &[&str]) -> Result<()> {
    run(&env_cargo(), args)
}

fn run(program: &str, args: &[&str]) -> Result<()> {
    run_with(program, args, &[])
}

/// [`run`] with these environment variables set.
fn run_with(program: &str, args: &[&str], envs: &[(&str, &str)]) -> Result<()> {
    let shown: Vec<String> = envs.iter().map(|(k, v)| format!("{k}={v} ")).collect();
    eprintln!("$ {}{program} {}", shown.concat(), args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .with_context(|| format!("cannot start {program}"))?;
    if !status.success() {
        bail!("`{program} {}` exited with {status}", args.join(" "));
    }
    Ok(())
}
