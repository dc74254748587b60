//! What a run left behind and where: criterion's estimates, file times, the machine and its load.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde_json::Value;

pub(super) fn target_dir() -> Result<PathBuf> {
    let out = Command::new(crate::env_cargo())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("cannot run cargo metadata")?;
    let meta: Value = serde_json::from_slice(&out.stdout).context("cargo metadata output")?;
    meta["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("cargo metadata has no target_directory")
}

/// One criterion result: median ns per iteration, the declared throughput in bytes, and when
/// it was measured.
pub(super) struct Measured {
    pub(super) ns: f64,
    pub(super) bytes: Option<f64>,
    pub(super) at: Option<SystemTime>,
}

/// Every criterion result under `target/criterion`, by (group, function).
pub(super) fn criterion_results(target: &Path) -> Vec<(String, String, Measured)> {
    let mut out = Vec::new();
    let mut stack = vec![target.join("criterion")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let in_new = p
                .parent()
                .and_then(|d| d.file_name())
                .is_some_and(|n| n == "new");
            if !(in_new && p.file_name().is_some_and(|n| n == "benchmark.json")) {
                continue;
            }
            let read = |path: &Path| -> Option<Value> {
                serde_json::from_slice(&std::fs::read(path).ok()?).ok()
            };
            let estimates = p.with_file_name("estimates.json");
            let (Some(b), Some(est)) = (read(&p), read(&estimates)) else {
                continue;
            };
            let Some(ns) = est["median"]["point_estimate"].as_f64() else {
                continue;
            };
            out.push((
                b["group_id"].as_str().unwrap_or_default().to_string(),
                b["function_id"].as_str().unwrap_or_default().to_string(),
                Measured {
                    ns,
                    bytes: b["throughput"]["Bytes"].as_f64(),
                    at: modified(&estimates),
                },
            ));
        }
    }
    out
}

pub(super) fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

pub(super) fn find<'a>(
    r: &'a [(String, String, Measured)],
    group: &str,
    function: &str,
) -> Option<&'a Measured> {
    r.iter()
        .find(|(g, f, _)| g == group && f == function)
        .map(|(_, _, m)| m)
}

pub(super) fn sh(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// `date -u` of a time, as the tables print it.
fn utc(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    sh("date", &["-u", "-d", &format!("@{secs}"), "+%F %H:%M"])
}

/// What a section heading adds when its results were not measured in this run.
pub(super) fn reused(
    measured_at: Option<SystemTime>,
    run_started: SystemTime,
    part_ran: bool,
) -> String {
    match measured_at {
        _ if part_ran => String::new(),
        Some(t) if t < run_started => {
            format!(
                " — not measured in this run: the results of {} (UTC)",
                utc(t)
            )
        }
        Some(_) => String::new(),
        None => " — not measured".into(),
    }
}

pub(super) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    format!(
        "{} × {cpu}, {mem_gib:.0} GiB RAM, {}",
        sh("nproc", &[]),
        sh("rustc", &["--version"])
    )
}

pub(super) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

pub(super) fn gzip_len(path: &Path) -> Result<u64> {
    let out = Command::new("gzip")
        .args(["-9", "-c"])
        .arg(path)
        .output()
        .context("cannot run gzip")?;
    Ok(out.stdout.len() as u64)
}
