//! `cargo xtask`: project automation.
//!
//! - `cargo xtask ci` — every check CI runs, in order, with the time each stage took: installs
//!   the wasm32 target and the rustfmt/clippy components when missing, then fmt check, clippy
//!   (native and wasm32, `-D warnings`), the schema crate built `no_std` for wasm32, all native
//!   tests, and the dependency guard.
//! - `cargo xtask deps` — only the dependency guard.
//! - `cargo xtask demo` — capture a fresh training-step trace with the `train_mlp` example
//!   (`target/demo/train.trace6.jsonl`) and an inference profile with the `generate` example
//!   (`target/demo/infer.profile.jsonl`), then summarise both with the CLI.

use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

const WASM: &str = "wasm32-unknown-unknown";

/// Crates that must never appear in `capture`'s dependency tree (it links into training
/// binaries) and in `viewer`'s (it is a wasm page), after rerun's `denied_sdk_deps`.
const DENIED: &[(&str, &[&str])] = &[
    (
        "candle-trace-capture",
        &["leptos", "web-sys", "wasm-bindgen", "js-sys"],
    ),
    (
        "candle-trace-viewer",
        &["candle-core", "candle-nn", "cudarc"],
    ),
    (
        "candle-trace-schema",
        &["candle-core", "cudarc", "leptos", "web-sys"],
    ),
];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("deps") => dependency_guard(),
        Some("demo") => demo(),
        _ => {
            eprintln!("usage: cargo xtask <ci|deps|demo>");
            std::process::exit(2);
        }
    }
}

fn ci() -> Result<()> {
    let started = Instant::now();
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
        run("rustup", &["target", "add", WASM])
    })?;
    stage("fmt", &|| cargo(&["fmt", "--all", "--", "--check"]))?;
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
        cargo(&[
            "clippy",
            "-p",
            "candle-trace-schema",
            "-p",
            "candle-trace-viewer",
            "--target",
            WASM,
            "--",
            "-D",
            "warnings",
        ])?;
        cargo(&[
            "clippy",
            "-p",
            "candle-trace-schema",
            "--no-default-features",
            "--target",
            WASM,
            "--",
            "-D",
            "warnings",
        ])
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
        cargo(&["test", "--workspace", "--all-features"])
    })?;
    stage("dependency guard", &dependency_guard)?;
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

fn demo() -> Result<()> {
    let dir = std::path::Path::new("target").join("demo");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let train = dir.join("train.trace6.jsonl");
    let train = train.to_str().context("the demo path is not UTF-8")?;
    let infer = dir.join("infer.profile.jsonl");
    let infer = infer.to_str().context("the demo path is not UTF-8")?;
    for (example, out) in [("train_mlp", train), ("generate", infer)] {
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
        ])?;
    }
    let cli = [
        "run",
        "--release",
        "-q",
        "-p",
        "candle-trace-capture",
        "--features",
        "cli",
        "--bin",
        "candle-trace",
        "--",
    ];
    for args in [
        vec!["summary", train],
        vec!["query", train, "--kind", "self", "--limit", "8"],
        vec!["query", train, "--kind", "gradients"],
        vec!["summary", infer],
        vec!["query", infer, "--kind", "requests"],
    ] {
        let mut all: Vec<&str> = cli.to_vec();
        all.extend(args);
        cargo(&all)?;
    }
    eprintln!("\ntrace written to {train}\ninference profile written to {infer}");
    Ok(())
}

fn dependency_guard() -> Result<()> {
    for (package, denied) in DENIED {
        let output = Command::new(env_cargo())
            .args([
                "tree",
                "-p",
                package,
                "--all-features",
                "-e",
                "normal,build",
                "--prefix",
                "none",
                "--format",
                "{p}",
            ])
            .output()
            .with_context(|| format!("cannot run cargo tree for {package}"))?;
        if !output.status.success() {
            bail!(
                "cargo tree -p {package} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let tree = String::from_utf8_lossy(&output.stdout);
        let found: Vec<&str> = tree
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|name| denied.contains(name))
            .collect();
        if !found.is_empty() {
            bail!("{package} must not depend on {found:?}");
        }
        eprintln!("{package}: none of {denied:?} in its tree");
    }
    Ok(())
}

fn env_cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn cargo(args: &[&str]) -> Result<()> {
    run(&env_cargo(), args)
}

fn run(program: &str, args: &[&str]) -> Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .status()
        .with_context(|| format!("cannot start {program}"))?;
    if !status.success() {
        bail!("`{program} {}` exited with {status}", args.join(" "));
    }
    Ok(())
}
