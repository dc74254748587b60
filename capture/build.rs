//! Build script: finds the resolved `candle-core` version for `candle::names::candle_version()`.
//!
//! Cargo gives build scripts no way to ask for a dependency's resolved version, so this script
//! reads the `Cargo.lock` of the build: it looks in `CARGO_MANIFEST_DIR`, `OUT_DIR` and their
//! ancestors (a workspace member finds the workspace lock; a target directory inside the
//! consumer's workspace finds the consumer's lock). When several `candle-core` versions are
//! locked it picks the one of the series this crate depends on (`0.11.`). When no lock file is
//! found it falls back to that series, `0.11`. The result is exported as
//! `CANDLE_TRACE_CANDLE_CORE_VERSION`. Nothing here can fail the build.

use std::path::{Path, PathBuf};

/// The semver series of the `candle-core` requirement in Cargo.toml (keep in step with it).
const SERIES: &str = "0.11";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let mut starts: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        starts.push(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("OUT_DIR") {
        starts.push(PathBuf::from(dir));
    }
    let version = starts
        .iter()
        .find_map(|start| find_lock(start))
        .and_then(|lock| {
            println!("cargo:rerun-if-changed={}", lock.display());
            std::fs::read_to_string(&lock).ok()
        })
        .and_then(|text| locked_version(&text, "candle-core"))
        .unwrap_or_else(|| SERIES.to_string());
    println!("cargo:rustc-env=CANDLE_TRACE_CANDLE_CORE_VERSION={version}");
}

/// The nearest `Cargo.lock` in `start` or one of its ancestors.
fn find_lock(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|dir| dir.join("Cargo.lock"))
        .find(|path| path.is_file())
}

/// The locked version of `package`, preferring the series this crate depends on.
fn locked_version(lock: &str, package: &str) -> Option<String> {
    let wanted_name = format!("name = \"{package}\"");
    let mut versions = Vec::new();
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() != wanted_name {
            continue;
        }
        if let Some(version) = lines.next().and_then(|next| {
            next.trim()
                .strip_prefix("version = \"")
                .and_then(|rest| rest.strip_suffix('"'))
        }) {
            versions.push(version.to_string());
        }
    }
    let series_prefix = format!("{SERIES}.");
    versions
        .iter()
        .find(|v| v.starts_with(&series_prefix))
        .or_else(|| versions.first())
        .cloned()
}
