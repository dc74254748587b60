//! Timed steps: every install or build prints a line when it starts and one with its time when
//! it ends, so a long first run never looks hung. Steps that do not depend on each other run on
//! background threads with their output in a log file, and the caller joins them when it needs
//! their result.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

/// The prefix of the line that closes a step; `cargo xtask fresh` reads it back.
pub const DONE_PREFIX: &str = "<== ";

/// The line printed when a step ends: `<== NAME: ok in 12.3 s`.
pub fn done_line(name: &str, ok: bool, secs: f64) -> String {
    let outcome = if ok { "ok" } else { "FAILED" };
    format!("{DONE_PREFIX}{name}: {outcome} in {secs:.1} s")
}

/// Read a [`done_line`] back: the step's name, whether it succeeded, and its seconds.
pub fn parse_done_line(line: &str) -> Option<(String, bool, f64)> {
    let rest = line.strip_prefix(DONE_PREFIX)?;
    let (name, rest) = rest.rsplit_once(": ")?;
    let (outcome, secs) = rest.split_once(" in ")?;
    let ok = match outcome {
        "ok" => true,
        "FAILED" => false,
        _ => return None,
    };
    let secs = secs.strip_suffix(" s")?.parse().ok()?;
    Some((name.to_string(), ok, secs))
}

/// The steps of one command and their times, shared with the background threads.
#[derive(Clone, Default)]
pub struct Steps {
    times: Arc<Mutex<Vec<(String, bool, f64)>>>,
    running: Arc<Mutex<Vec<(String, Instant)>>>,
}

/// The heartbeat line: every running step with how long it has run, or `None` when none runs.
pub fn still_running_line(running: &[(String, u64)]) -> Option<String> {
    if running.is_empty() {
        return None;
    }
    let list: Vec<String> = running
        .iter()
        .map(|(name, secs)| format!("{name} ({}m {:02}s)", secs / 60, secs % 60))
        .collect();
    Some(format!("... still running: {}", list.join(", ")))
}

impl Steps {
    /// Print [`still_running_line`] every `every` while steps run (a quiet `cargo -q` build
    /// of several minutes must not look hung). The thread ends with the process.
    pub fn heartbeat(&self, every: std::time::Duration) {
        let running = Arc::clone(&self.running);
        std::thread::spawn(move || loop {
            std::thread::sleep(every);
            let now: Vec<(String, u64)> = match running.lock() {
                Ok(r) => r
                    .iter()
                    .map(|(n, t)| (n.clone(), t.elapsed().as_secs()))
                    .collect(),
                Err(_) => return,
            };
            if let Some(line) = still_running_line(&now) {
                eprintln!("{line}");
            }
        });
    }

    fn begin(&self, name: &str) {
        if let Ok(mut r) = self.running.lock() {
            r.push((name.to_string(), Instant::now()));
        }
    }

    /// Run `f` as the step `name` on this thread, printing its start and its time.
    pub fn run<T>(&self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        eprintln!("\n==> {name}");
        let started = Instant::now();
        self.begin(name);
        let result = f();
        self.record(name, result.is_ok(), started.elapsed().as_secs_f64());
        result.with_context(|| format!("step `{name}` failed"))
    }

    /// Run `f` as the step `name` on a background thread. Commands it starts should write to
    /// a log (see [`run_logged`]) so that the foreground's output stays readable.
    pub fn spawn<T: Send + 'static>(
        &self,
        name: &str,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Background<T> {
        eprintln!("\n==> {name} (in the background)");
        self.begin(name);
        let steps = self.clone();
        let owned = name.to_string();
        let handle = std::thread::spawn(move || {
            let started = Instant::now();
            let result = f();
            steps.record(&owned, result.is_ok(), started.elapsed().as_secs_f64());
            result
        });
        Background {
            name: name.to_string(),
            handle,
        }
    }

    fn record(&self, name: &str, ok: bool, secs: f64) {
        eprintln!("{}", done_line(name, ok, secs));
        if let Ok(mut r) = self.running.lock() {
            r.retain(|(n, _)| n != name);
        }
        if let Ok(mut times) = self.times.lock() {
            times.push((name.to_string(), ok, secs));
        }
    }

    /// Print every finished step with its time, in the order they finished.
    pub fn print_summary(&self, total_secs: f64) {
        eprintln!("\nstep times:");
        if let Ok(times) = self.times.lock() {
            for (name, ok, secs) in times.iter() {
                let mark = if *ok { "" } else { "  FAILED" };
                eprintln!("  {name:<40} {secs:>7.1} s{mark}");
            }
        }
        eprintln!("  {:<40} {total_secs:>7.1} s", "total");
    }
}

/// A step running on a background thread.
pub struct Background<T> {
    name: String,
    handle: JoinHandle<Result<T>>,
}

impl<T> Background<T> {
    /// Wait for the step and return its result.
    pub fn join(self) -> Result<T> {
        match self.handle.join() {
            Ok(result) => result.with_context(|| format!("step `{}` failed", self.name)),
            Err(_) => Err(anyhow!("step `{}` panicked", self.name)),
        }
    }
}

/// Where background steps write their commands' output: `target/xtask-logs/NAME.log`.
pub fn log_path(name: &str) -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| "target".into(), PathBuf::from);
    target.join("xtask-logs").join(format!("{name}.log"))
}

/// Run `program args` with stdout and stderr appended to `log`; on failure the error names the
/// log and carries its last lines.
pub fn run_logged(program: &Path, args: &[&str], log: &Path, envs: &[(&str, &str)]) -> Result<()> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let out = File::options()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    let err = out
        .try_clone()
        .with_context(|| format!("cannot open {}", log.display()))?;
    eprintln!(
        "$ {} {}  (output: {})",
        program.display(),
        args.join(" "),
        log.display()
    );
    let status = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .with_context(|| format!("cannot start {}", program.display()))?;
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "`{} {}` exited with {status}; last lines of {}:\n{}",
            program.display(),
            args.join(" "),
            log.display(),
            tail.join("\n")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_lines_read_back() {
        let line = done_line("install wasm-opt: binaryen 116", true, 3.04);
        assert_eq!(line, "<== install wasm-opt: binaryen 116: ok in 3.0 s");
        assert_eq!(
            parse_done_line(&line),
            Some(("install wasm-opt: binaryen 116".to_string(), true, 3.0))
        );
        assert_eq!(
            parse_done_line("<== viewer: FAILED in 120.5 s"),
            Some(("viewer".to_string(), false, 120.5))
        );
        assert_eq!(parse_done_line("==> viewer"), None);
        assert_eq!(parse_done_line("<== viewer: maybe in 1 s"), None);
    }

    #[test]
    fn the_heartbeat_names_every_running_step_with_minutes_and_seconds() {
        assert_eq!(still_running_line(&[]), None);
        assert_eq!(
            still_running_line(&[("examples".into(), 185), ("wasm".into(), 9)]).as_deref(),
            Some("... still running: examples (3m 05s), wasm (0m 09s)")
        );
    }

    #[test]
    fn background_steps_are_timed_and_joined() {
        let steps = Steps::default();
        let background = steps.spawn("add", || Ok(2 + 2));
        let failing = steps.spawn("fail", || -> Result<()> { bail!("no") });
        assert_eq!(background.join().ok(), Some(4));
        let err = failing.join().err().map(|e| format!("{e:#}"));
        assert_eq!(err.as_deref(), Some("step `fail` failed: no"));
        let times = steps.times.lock().map(|t| t.len()).unwrap_or(0);
        assert_eq!(times, 2);
        let running = steps.running.lock().map(|r| r.len()).unwrap_or(99);
        assert_eq!(running, 0);
    }
}
