//! `cargo xtask fuzz`: seed the `fuzz/` corpora from the fixtures and run every cargo-fuzz
//! target for a while (CI's smoke stage runs each for [`SMOKE_SECONDS`]).
//!
//! - No nightly toolchain: prints a `SKIPPED` line and succeeds (the fuzz targets need
//!   `-Zsanitizer`); everything else about CI still runs.
//! - cargo-fuzz is installed pinned ([`tools::CARGO_FUZZ`]) under the tools root when missing.
//! - Targets are whatever `cargo fuzz list` says, so a new target is one file in
//!   `fuzz/fuzz_targets/` plus its `[[bin]]` entry; it is seeded and smoked with no change here.
//! - Corpora live in `fuzz/corpus/<target>/` (git-ignored) and grow across runs; seeds are every
//!   `tests/fixtures/**/*.jsonl`, written as `seed-<name>`. Targets whose name ends in `_chunked`
//!   read a chunk header first (see `fuzz/src/lib.rs`), so their seeds get one: 3 cuts.
//! - A crash fails the command (cargo-fuzz exits non-zero and leaves the input in
//!   `fuzz/artifacts/<target>/`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::tools;

/// Seconds per target in CI's smoke stage.
pub const SMOKE_SECONDS: u64 = 20;

/// Chunk header for `*_chunked` seeds: 3 cuts, at 16, 64 and 256 (modulo the file length).
const CHUNK_HEADER: &[u8] = &[3, 16, 0, 64, 0, 0, 1];

/// `cargo xtask fuzz [--seconds N] [TARGET...]`.
pub fn run(args: &[String]) -> Result<()> {
    let mut seconds = SMOKE_SECONDS;
    let mut only: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .context("--seconds needs a number")?
            }
            other if other.starts_with('-') => {
                bail!("unknown fuzz option {other} (use --seconds N, then target names)")
            }
            target => only.push(target.to_string()),
        }
    }
    smoke(seconds, &only)
}

/// Seed and run each target (all when `only` is empty) for `seconds`.
pub fn smoke(seconds: u64, only: &[String]) -> Result<()> {
    if !tools::nightly_available() {
        eprintln!(
            "SKIPPED fuzz: no nightly toolchain (`rustup toolchain install nightly` enables it)"
        );
        return Ok(());
    }
    tools::ensure_cargo_fuzz()?;
    let fuzz_dir = Path::new("fuzz");
    let targets = list_targets(fuzz_dir)?;
    for t in only {
        if !targets.contains(t) {
            bail!("no fuzz target {t} (targets: {})", targets.join(", "));
        }
    }
    let chosen: Vec<&String> = targets
        .iter()
        .filter(|t| only.is_empty() || only.contains(t))
        .collect();
    let seeds = seed_files()?;
    for target in chosen {
        let n = seed(fuzz_dir, target, &seeds)?;
        eprintln!("fuzz {target}: {n} seeds, {seconds} s");
        let status = cargo_fuzz(fuzz_dir)
            .args(["run", "-O", "-a", target, "--"])
            .arg(format!("-max_total_time={seconds}"))
            .args(["-rss_limit_mb=4096", "-timeout=30", "-print_final_stats=1"])
            .status()
            .context("cannot start cargo fuzz")?;
        if !status.success() {
            bail!(
                "fuzz target {target} failed ({status}); the input is in fuzz/artifacts/{target}/ \
                 (reproduce: cd fuzz && cargo +nightly fuzz run -O -a {target} ARTIFACT)"
            );
        }
    }
    Ok(())
}

/// `cargo fuzz` on the nightly toolchain, in `fuzz/`, with the pinned tools on `PATH`. The fuzz
/// package builds into `fuzz/target` (a `CARGO_TARGET_DIR` would mix its sanitizer build with
/// the workspace's).
fn cargo_fuzz(fuzz_dir: &Path) -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", "cargo", "fuzz"])
        .current_dir(fuzz_dir)
        .env("PATH", tools::path_with_tools())
        .env_remove("CARGO_TARGET_DIR");
    cmd
}

fn list_targets(fuzz_dir: &Path) -> Result<Vec<String>> {
    let out = cargo_fuzz(fuzz_dir)
        .arg("list")
        .output()
        .context("cannot run cargo fuzz list")?;
    if !out.status.success() {
        bail!(
            "cargo fuzz list failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let targets: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    if targets.is_empty() {
        bail!("cargo fuzz list found no targets");
    }
    Ok(targets)
}

/// Every `*.jsonl` and `*.json` input under `tests/fixtures` (the malformed suite and the Chrome
/// fixtures included; not the `expected/` and `golden/` outputs), sorted.
fn seed_files() -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut dirs = vec![PathBuf::from("tests").join("fixtures")];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                // expected/ and golden/ hold tool outputs, not inputs.
                if name != "expected" && name != "golden" {
                    dirs.push(path);
                }
            } else if name != "expected.json"
                && path
                    .extension()
                    .is_some_and(|e| e == "jsonl" || e == "json")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Copy the seeds into `fuzz/corpus/<target>/`; returns how many.
fn seed(fuzz_dir: &Path, target: &str, seeds: &[PathBuf]) -> Result<usize> {
    let corpus = fuzz_dir.join("corpus").join(target);
    std::fs::create_dir_all(&corpus)
        .with_context(|| format!("cannot create {}", corpus.display()))?;
    for path in seeds {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let name = path.file_name().context("a seed without a name")?;
        let mut data = Vec::with_capacity(bytes.len() + CHUNK_HEADER.len());
        if target.ends_with("_chunked") {
            data.extend_from_slice(CHUNK_HEADER);
        }
        data.extend_from_slice(&bytes);
        let out = corpus.join(format!("seed-{}", name.to_string_lossy()));
        std::fs::write(&out, data).with_context(|| format!("cannot write {}", out.display()))?;
    }
    Ok(seeds.len())
}
