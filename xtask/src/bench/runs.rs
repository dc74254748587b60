//! The timed runs outside criterion: `candle-trace summary` under `/usr/bin/time` (wall clock,
//! peak resident set) and the browser bench (`tests/e2e/bench.mjs`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::tools;

use super::SUMMARY_RUNS;

/// Time `cli summary trace` [`SUMMARY_RUNS`] times under GNU time: wall seconds and peak
/// resident set per run, the file read once before so every run finds it in the page cache.
pub(super) fn time_summary(cli: &Path, trace: &Path) -> Result<Value> {
    let bytes = std::fs::metadata(trace)
        .with_context(|| format!("{}", trace.display()))?
        .len();
    // Warm the page cache: the figure is the reader's, not the disk's.
    std::io::copy(
        &mut std::fs::File::open(trace).with_context(|| format!("{}", trace.display()))?,
        &mut std::io::sink(),
    )?;
    let mut runs = Vec::new();
    for _ in 0..SUMMARY_RUNS {
        let out = Command::new("/usr/bin/time")
            .args(["-f", "candle-trace-bench %e %M %U %S"])
            .arg(cli)
            .arg("summary")
            .arg(trace)
            .output()
            .context("cannot run /usr/bin/time (GNU time) for the summary benchmark")?;
        if !out.status.success() {
            bail!(
                "`candle-trace summary {}` failed: {}",
                trace.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let t = parse_gnu_time(&stderr).with_context(|| {
            format!("no `candle-trace-bench` line from /usr/bin/time in: {stderr}")
        })?;
        eprintln!(
            "summary {}: {:.2} s ({:.2} s user, {:.2} s system), peak RSS {:.0} MB",
            trace.display(),
            t.wall_s,
            t.user_s,
            t.sys_s,
            t.max_rss_kib * 1024.0 / 1e6
        );
        runs.push(serde_json::json!({
            "wall_s": t.wall_s,
            "user_s": t.user_s,
            "sys_s": t.sys_s,
            "max_rss_bytes": t.max_rss_kib * 1024.0,
        }));
    }
    Ok(serde_json::json!({
        "trace": trace.display().to_string(),
        "trace_bytes": bytes,
        "runs": runs,
    }))
}

/// One run as GNU time reports it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct GnuTime {
    pub(super) wall_s: f64,
    pub(super) max_rss_kib: f64,
    /// CPU time in the program itself: the reader's own work.
    pub(super) user_s: f64,
    /// CPU time in the kernel for it: reading the file, and first-touch page faults (zeroing
    /// the memory the reader fills), which on a VM can swing between runs.
    pub(super) sys_s: f64,
}

/// The `candle-trace-bench %e %M %U %S` line GNU time prints.
pub(super) fn parse_gnu_time(stderr: &str) -> Option<GnuTime> {
    let line = stderr
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("candle-trace-bench "))?;
    let mut it = line.split_whitespace().map(str::parse::<f64>);
    let mut next = || it.next()?.ok();
    Some(GnuTime {
        wall_s: next()?,
        max_rss_kib: next()?,
        user_s: next()?,
        sys_s: next()?,
    })
}

/// The median of `values` (the upper middle one for an even count); `None` when empty.
pub(super) fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// Build the page and run `tests/e2e/bench.mjs` on the pairs and the frames file; the frames'
/// peer comparison runs on the 100 MB pair (speedscope does not open the 1M-span file in time).
pub(super) fn run_browser(
    pairs: &[(PathBuf, PathBuf)],
    frames_file: &Path,
    browser_json: &Path,
    runs: u32,
) -> Result<()> {
    crate::web::build_viewer()?;
    tools::ensure_browser()?;
    let e2e = Path::new("tests").join("e2e");
    crate::npm_ci(&e2e)?;
    let mut node_args: Vec<String> = vec!["bench.mjs".into()];
    for (t, c) in pairs {
        node_args.extend([
            "--pair".into(),
            t.display().to_string(),
            c.display().to_string(),
        ]);
    }
    node_args.extend([
        "--frames".into(),
        frames_file.display().to_string(),
        "--runs".into(),
        runs.to_string(),
        "--out".into(),
        browser_json.display().to_string(),
    ]);
    if let Some((t, c)) = pairs
        .iter()
        .find(|(t, _)| t.to_string_lossy().contains("gen-100mb"))
    {
        node_args.extend([
            "--frames-peer".into(),
            t.display().to_string(),
            c.display().to_string(),
        ]);
    }
    let status = Command::new("node")
        .args(&node_args)
        .current_dir(&e2e)
        .env("CHROMIUM", "/usr/bin/chromium")
        .status()
        .context("cannot start node")?;
    if !status.success() {
        bail!("browser benchmarks failed ({status})");
    }
    Ok(())
}
