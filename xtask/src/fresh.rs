//! `cargo xtask fresh`: a newcomer's first `cargo xtask demo`, reproduced on this machine, then
//! a second (warm) one, with the time of every step and of the viewer being served.
//!
//! Cold means: a fresh clone of this repository's `HEAD` (so an empty `target/`),
//! `CANDLE_TRACE_TOOLS` pointing at an empty folder, and the wasm32 target removed from the
//! toolchain the demo runs on (`--toolchain`, default the active one; the demo adds it back).
//! Crates come from cargo's registry cache as they would from crates.io.
//!
//! `cargo xtask fresh --ci` does the same for CI: `bash .ci/run` (which installs what it needs
//! and runs `cargo xtask ci`) once in the cold clone, with the time of every stage and in all.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::steps::parse_done_line;
use crate::tools::WASM32;

/// One demo run: each step's seconds, and when the viewer answered (seconds from the start).
#[derive(Debug, Default)]
pub struct DemoRun {
    /// `(step, ok, seconds)` in the order the steps finished.
    pub steps: Vec<(String, bool, f64)>,
    /// Seconds from starting `cargo xtask demo` until the page and its wasm were served.
    pub served_secs: Option<f64>,
}

/// `cargo xtask fresh [--ci] [--toolchain NAME] [--dir DIR]`.
pub fn run(args: &[String]) -> Result<()> {
    let mut toolchain = None;
    let mut ci = false;
    let mut dir = PathBuf::from("target").join("fresh");
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--toolchain" => {
                toolchain = Some(it.next().context("--toolchain needs a name")?.clone())
            }
            "--dir" => dir = PathBuf::from(it.next().context("--dir needs a folder")?),
            "--ci" => ci = true,
            other => bail!("unknown fresh option {other} (use --ci, --toolchain NAME, --dir DIR)"),
        }
    }
    let toolchain = match toolchain {
        Some(t) => t,
        None => active_toolchain()?,
    };
    let dirty = Command::new("git")
        .args(["status", "--porcelain"])
        .output()
        .context("cannot run git")?;
    if !dirty.stdout.is_empty() {
        eprintln!("note: uncommitted changes are not in the fresh clone (it clones HEAD)");
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let dir =
        std::fs::canonicalize(&dir).with_context(|| format!("cannot open {}", dir.display()))?;
    let clone = dir.join("candle-trace");
    let tools = dir.join("tools");
    std::fs::create_dir_all(&tools)
        .with_context(|| format!("cannot create {}", tools.display()))?;
    let repo = std::env::current_dir().context("no current folder")?;
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .context("cannot run git")?;
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    let clone_str = clone.to_str().context("the clone path is not UTF-8")?;
    crate::run(
        "git",
        &[
            "clone",
            "-q",
            "--no-checkout",
            repo.to_str().context("the repository path is not UTF-8")?,
            clone_str,
        ],
    )?;
    // HEAD of this worktree, whatever branch the clone's origin has checked out.
    crate::run("git", &["-C", clone_str, "checkout", "-q", &head])?;
    crate::run(
        "rustup",
        &["target", "remove", "--toolchain", &toolchain, WASM32],
    )?;

    if ci {
        eprintln!("\n#### cold CI (fresh clone, empty tools folder, no {WASM32} target) ####");
        let run = ci_run(&clone, &tools, &toolchain);
        let restored = crate::run(
            "rustup",
            &["target", "add", "--toolchain", &toolchain, WASM32],
        );
        let run = run?;
        restored?;
        eprintln!("\n{}", ci_report(&run, &toolchain));
        if run.served_secs.is_none() {
            bail!("the cold CI run failed");
        }
        return Ok(());
    }

    eprintln!("\n#### cold demo (fresh clone, empty tools folder, no {WASM32} target) ####");
    let cold = demo_until_served(&clone, &tools, &toolchain);
    // Whatever happened, leave the toolchain as it was.
    let restored = crate::run(
        "rustup",
        &["target", "add", "--toolchain", &toolchain, WASM32],
    );
    let cold = cold?;
    restored?;
    eprintln!("\n#### warm demo (the same clone and tools again) ####");
    let warm = demo_until_served(&clone, &tools, &toolchain)?;

    eprintln!("\n{}", report(&cold, &warm, &toolchain));
    Ok(())
}

/// `program args` in the cold `clone`: its tools folder and toolchain, none of this process's
/// cargo settings, no stdin, stderr piped to be read line by line.
fn in_clone(program: &str, args: &[&str], clone: &Path, tools: &Path, toolchain: &str) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(clone)
        .env("CANDLE_TRACE_TOOLS", tools)
        .env("RUSTUP_TOOLCHAIN", toolchain)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO")
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// `bash .ci/run` in `clone` to its end: every stage's time, and (in `served_secs`) the total
/// when it passed.
fn ci_run(clone: &Path, tools: &Path, toolchain: &str) -> Result<DemoRun> {
    let started = Instant::now();
    let mut child = in_clone("bash", &[".ci/run"], clone, tools, toolchain)
        .spawn()
        .context("cannot start bash .ci/run")?;
    let stderr = child.stderr.take().context("no stderr from CI")?;
    let mut run = DemoRun::default();
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        eprintln!("{line}");
        if let Some(step) = parse_done_line(&line) {
            run.steps.push(step);
        }
    }
    let status = child.wait().context("cannot wait for CI")?;
    run.served_secs = status.success().then(|| started.elapsed().as_secs_f64());
    Ok(run)
}

/// A cold CI run: every stage and background step with its seconds, then the total.
pub fn ci_report(run: &DemoRun, toolchain: &str) -> String {
    let mut out =
        format!("cold CI on toolchain {toolchain} (seconds; background steps overlap):\n");
    for (name, ok, secs) in &run.steps {
        let mark = if *ok { "" } else { " FAILED" };
        out.push_str(&format!("  {name:<52} {secs:>9.1}{mark}\n"));
    }
    let total = run
        .served_secs
        .map_or_else(|| "failed".to_string(), |s| format!("{s:.1}"));
    out.push_str(&format!("  {:<52} {total:>9}\n", "passed after"));
    out
}

fn active_toolchain() -> Result<String> {
    let out = Command::new("rustup")
        .args(["show", "active-toolchain"])
        .output()
        .context("cannot run rustup")?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .map(str::to_string)
        .context("rustup names no active toolchain")
}

/// The two runs side by side: every step with its cold and warm seconds.
pub fn report(cold: &DemoRun, warm: &DemoRun, toolchain: &str) -> String {
    let mut names: Vec<&str> = cold.steps.iter().map(|(n, _, _)| n.as_str()).collect();
    for (n, _, _) in &warm.steps {
        if !names.contains(&n.as_str()) {
            names.push(n);
        }
    }
    let secs = |run: &DemoRun, name: &str| {
        run.steps.iter().find(|(n, _, _)| n == name).map_or_else(
            || "-".to_string(),
            |(_, ok, s)| format!("{s:.1}{}", if *ok { "" } else { " FAILED" }),
        )
    };
    let mut out =
        format!("demo steps on toolchain {toolchain} (seconds; background steps overlap):\n");
    out.push_str(&format!("  {:<52} {:>9} {:>9}\n", "step", "cold", "warm"));
    for name in names {
        out.push_str(&format!(
            "  {name:<52} {:>9} {:>9}\n",
            secs(cold, name),
            secs(warm, name)
        ));
    }
    let served = |run: &DemoRun| {
        run.served_secs
            .map_or_else(|| "never".to_string(), |s| format!("{s:.1}"))
    };
    out.push_str(&format!(
        "  {:<52} {:>9} {:>9}\n",
        "viewer served after",
        served(cold),
        served(warm)
    ));
    out
}

/// Run `cargo xtask demo` in `clone` until it serves the viewer, check that the page and its
/// wasm come back with status 200, then stop it.
fn demo_until_served(clone: &Path, tools: &Path, toolchain: &str) -> Result<DemoRun> {
    let port = free_port()?;
    let started = Instant::now();
    let port_text = port.to_string();
    let args = ["xtask", "demo", "--port", &port_text];
    let mut child = in_clone("cargo", &args, clone, tools, toolchain)
        .spawn()
        .context("cannot start cargo xtask demo")?;
    let stderr = child.stderr.take().context("no stderr from the demo")?;
    let mut run = DemoRun::default();
    let mut served = Err(anyhow::anyhow!("the demo ended before serving the viewer"));
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        eprintln!("{line}");
        if let Some(step) = parse_done_line(&line) {
            run.steps.push(step);
        }
        // `candle-trace view` says so once it listens.
        if line.starts_with("candle-trace: serving the viewer") {
            served = check_served(port);
            run.served_secs = served.is_ok().then(|| started.elapsed().as_secs_f64());
            break;
        }
    }
    // The demo serves until stopped: stop the process this function started.
    let _ = child.kill();
    let _ = child.wait();
    served?;
    Ok(run)
}

fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener
        .local_addr()
        .context("cannot find a free port")?
        .port())
}

/// GET `/`, the viewer's wasm and the trace from the demo's server; each must answer 200.
fn check_served(port: u16) -> Result<()> {
    for path in [
        "/",
        "/candle-trace-viewer_bg.wasm",
        "/files/0/train.trace6.jsonl",
    ] {
        let status = crate::serve::get_status(port, path)?;
        if status != 200 {
            bail!("GET {path} answered {status}");
        }
        eprintln!("GET {path}: 200");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ci_report_lists_every_stage_then_the_total() {
        let mut run = DemoRun {
            steps: vec![
                ("fmt".into(), true, 3.04),
                ("install trunk".into(), false, 960.0),
            ],
            served_secs: Some(1500.0),
        };
        let text = ci_report(&run, "1.95.0");
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [
                vec!["fmt", "3.0"],
                vec!["install", "trunk", "960.0", "FAILED"],
                vec!["passed", "after", "1500.0"],
            ]
        );
        run.served_secs = None;
        assert!(ci_report(&run, "x")
            .ends_with("passed after                                            failed\n"));
    }

    #[test]
    fn the_report_puts_cold_and_warm_side_by_side() {
        let cold = DemoRun {
            steps: vec![
                ("wasm32 target".into(), true, 20.0),
                ("examples".into(), true, 400.31),
            ],
            served_secs: Some(700.0),
        };
        let warm = DemoRun {
            steps: vec![
                ("wasm32 target".into(), true, 0.1),
                ("examples".into(), false, 3.0),
            ],
            served_secs: None,
        };
        let text = report(&cold, &warm, "1.95.0");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "demo steps on toolchain 1.95.0 (seconds; background steps overlap):"
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["wasm32", "target", "20.0", "0.1"]
        );
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["examples", "400.3", "3.0", "FAILED"]
        );
        assert_eq!(
            lines[4].split_whitespace().collect::<Vec<_>>(),
            ["viewer", "served", "after", "700.0", "never"]
        );
    }
}
