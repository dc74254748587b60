//! Pinned web tools and the browser, installed once under a fixed root and reused.
//!
//! Trunk's own downloads of wasm-bindgen and wasm-opt cannot work here (no network beyond the
//! package registries), so every tool is built from crates.io with `cargo install --root`
//! into [`tools_root`] and found there by version. Debian's `binaryen` is never used: its
//! wasm-opt (108) silently breaks the page.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{cargo, run};

/// Trunk version (0.22 needs a newer rustc).
pub const TRUNK: &str = "0.21.14";
/// wasm-opt crate version (binaryen 116), named `version_116` in `web/Trunk.toml`.
pub const WASM_OPT: &str = "0.116.1";
/// cargo-fuzz version (runs the `fuzz/` targets; needs a nightly toolchain).
pub const CARGO_FUZZ: &str = "0.13.2";

/// Where the tools live: `$CANDLE_TRACE_TOOLS`, else `~/.cache/candle-trace/tools`.
pub fn tools_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("CANDLE_TRACE_TOOLS") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache").join("candle-trace").join("tools")
}

/// `PATH` with the tools' `bin` first.
pub fn path_with_tools() -> String {
    let bin = tools_root().join("bin");
    match std::env::var("PATH") {
        Ok(path) => format!("{}:{path}", bin.display()),
        Err(_) => bin.display().to_string(),
    }
}

/// The `wasm-bindgen` version locked in Cargo.lock (wasm-bindgen-cli must match it exactly).
pub fn locked_wasm_bindgen() -> Result<String> {
    let lock = std::fs::read_to_string("Cargo.lock").context("cannot read Cargo.lock")?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == "name = \"wasm-bindgen\"" {
            if let Some(v) = lines.next().and_then(|l| l.strip_prefix("version = \"")) {
                return Ok(v.trim_end_matches('"').to_string());
            }
        }
    }
    bail!("Cargo.lock locks no wasm-bindgen")
}

/// First line of `BIN --version` from the tools root, if the binary is there.
fn version_of(bin: &str) -> Option<String> {
    let path = tools_root().join("bin").join(bin);
    let out = Command::new(path).arg("--version").output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    })
}

fn install(krate: &str, version: &str, locked: bool) -> Result<()> {
    let root = tools_root();
    let root = root.to_str().context("tools root is not UTF-8")?;
    let mut args = vec!["install", krate, "--version", version, "--root", root];
    if locked {
        args.push("--locked");
    }
    cargo(&args)
}

/// Install trunk, wasm-bindgen-cli (= Cargo.lock's wasm-bindgen) and wasm-opt when missing
/// or at another version.
pub fn ensure_web_tools() -> Result<()> {
    if !version_of("trunk").is_some_and(|v| v.contains(TRUNK)) {
        install("trunk", TRUNK, true)?;
    }
    let wb = locked_wasm_bindgen()?;
    if !version_of("wasm-bindgen").is_some_and(|v| v.split_whitespace().any(|w| w == wb)) {
        // Not --locked: its lock pins a crate version the registry no longer has.
        install("wasm-bindgen-cli", &wb, false)?;
    }
    if !version_of("wasm-opt").is_some_and(|v| v.contains("version 116")) {
        install("wasm-opt", WASM_OPT, true)?;
    }
    for bin in ["trunk", "wasm-bindgen", "wasm-opt"] {
        eprintln!(
            "{bin}: {}",
            version_of(bin).unwrap_or_else(|| "missing".into())
        );
    }
    Ok(())
}

/// Install cargo-fuzz when missing or at another version.
pub fn ensure_cargo_fuzz() -> Result<()> {
    if !version_of("cargo-fuzz").is_some_and(|v| v.split_whitespace().any(|w| w == CARGO_FUZZ)) {
        install("cargo-fuzz", CARGO_FUZZ, true)?;
    }
    eprintln!(
        "cargo-fuzz: {}",
        version_of("cargo-fuzz").unwrap_or_else(|| "missing".into())
    );
    Ok(())
}

/// Whether rustup has a nightly toolchain (cargo-fuzz needs `-Zsanitizer`).
pub fn nightly_available() -> bool {
    Command::new("rustup")
        .args(["run", "nightly", "rustc", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Debian's chromium and chromedriver (headless browser tests), and node/npm.
pub fn ensure_browser() -> Result<()> {
    let missing: Vec<&str> = [
        ("chromium", "/usr/bin/chromium"),
        ("chromium-driver", "/usr/bin/chromedriver"),
        ("nodejs", "/usr/bin/node"),
        ("npm", "/usr/bin/npm"),
    ]
    .into_iter()
    .filter(|(_, path)| !Path::new(path).exists())
    .map(|(pkg, _)| pkg)
    .collect();
    if missing.is_empty() {
        return Ok(());
    }
    run("apt-get", &["update", "-qq"])?;
    let mut args = vec!["install", "-y", "-qq", "--no-install-recommends"];
    args.extend(&missing);
    run("apt-get", &args)
}

/// `trunk build --release` in `web/` (offline: `cargo fetch` first).
pub fn build_viewer() -> Result<()> {
    ensure_web_tools()?;
    cargo(&["fetch"])?;
    let status = Command::new(tools_root().join("bin").join("trunk"))
        .args(["build", "--release"])
        .current_dir("web")
        .env("PATH", path_with_tools())
        .status()
        .context("cannot start trunk")?;
    if !status.success() {
        bail!("trunk build --release failed ({status})");
    }
    Ok(())
}
