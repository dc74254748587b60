//! Pinned web tools, the wasm32 target and the browser, installed once and reused.
//!
//! Trunk's own downloads of wasm-bindgen and wasm-opt cannot work here (no network beyond the
//! package registries), so every tool is installed from a registry into [`tools_root`] and
//! found there by version: wasm-opt from npm's `binaryen` (a few seconds; `cargo install
//! wasm-opt` when npm is missing), wasm-bindgen-cli and trunk with `cargo install --root`.
//! Debian's `binaryen` is never used: its wasm-opt (108) silently breaks the page.
//!
//! The decisions (is this the version we want, is the target there, what to tell the user when
//! an install fails) are pure functions with unit tests that need no network.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::run;
use crate::steps::{log_path, run_logged};

/// Trunk version (0.22 needs a newer rustc).
pub const TRUNK: &str = "0.21.14";
/// binaryen's npm package version; its wasm-opt says `version 116`, which `web/Trunk.toml`
/// names `version_116`.
pub const BINARYEN_NPM: &str = "116.0.0";
/// wasm-opt crate version (binaryen 116), the fallback when npm is missing.
pub const WASM_OPT_CRATE: &str = "0.116.1";
/// The binaryen release wasm-opt must report.
pub const WASM_OPT_RELEASE: &str = "116";
/// cargo-fuzz version (runs the `fuzz/` targets; needs a nightly toolchain).
pub const CARGO_FUZZ: &str = "0.13.2";
/// The page's target.
pub const WASM32: &str = "wasm32-unknown-unknown";

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
    locked_version(&lock, "wasm-bindgen").context("Cargo.lock locks no wasm-bindgen")
}

/// The version of `package` in the text of a Cargo.lock.
fn locked_version(lock: &str, package: &str) -> Option<String> {
    let name_line = format!("name = \"{package}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == name_line {
            let version = lines.next()?.strip_prefix("version = \"")?;
            return Some(version.trim_end_matches('"').to_string());
        }
    }
    None
}

/// A tool the page's build needs, at the version this repository pins.
#[derive(Clone, Debug, PartialEq)]
pub enum Tool {
    /// Trunk (CI builds the page with it as well as with xtask's builder).
    Trunk,
    /// wasm-bindgen-cli at Cargo.lock's wasm-bindgen version.
    WasmBindgen(String),
    /// binaryen's wasm-opt, release [`WASM_OPT_RELEASE`].
    WasmOpt,
}

impl Tool {
    /// The executable's name in `bin/`.
    pub fn bin(&self) -> &'static str {
        match self {
            Tool::Trunk => "trunk",
            Tool::WasmBindgen(_) => "wasm-bindgen",
            Tool::WasmOpt => "wasm-opt",
        }
    }

    /// The tool and its wanted version, as a person would say it.
    pub fn label(&self) -> String {
        match self {
            Tool::Trunk => format!("trunk {TRUNK}"),
            Tool::WasmBindgen(v) => format!("wasm-bindgen {v}"),
            Tool::WasmOpt => format!("wasm-opt (binaryen {WASM_OPT_RELEASE})"),
        }
    }

    /// Whether the first line of `BIN --version` is the wanted version.
    pub fn version_matches(&self, version_line: &str) -> bool {
        let words: Vec<&str> = version_line.split_whitespace().collect();
        match self {
            Tool::Trunk => words.first() == Some(&"trunk") && words.get(1) == Some(&TRUNK),
            Tool::WasmBindgen(want) => {
                words.first() == Some(&"wasm-bindgen") && words.get(1) == Some(&want.as_str())
            }
            // `wasm-opt version 116 (version_116)`
            Tool::WasmOpt => words
                .windows(2)
                .any(|w| w[0] == "version" && w[1] == WASM_OPT_RELEASE),
        }
    }

    /// The command that installs the tool into `root` by hand.
    pub fn install_command(&self, root: &Path) -> String {
        let root = root.display();
        match self {
            Tool::Trunk => format!("cargo install trunk --version {TRUNK} --locked --root {root}"),
            Tool::WasmBindgen(v) => {
                format!("cargo install wasm-bindgen-cli --version {v} --root {root}")
            }
            Tool::WasmOpt => format!(
                "npm install --prefix {root}/npm binaryen@{BINARYEN_NPM} && \
                 ln -sf ../npm/node_modules/binaryen/bin/wasm-opt {root}/bin/wasm-opt"
            ),
        }
    }
}

/// The one line a user reads when a tool could not be installed: what, why, and how to get it.
pub fn install_failed_line(tool: &Tool, root: &Path, reason: &str) -> String {
    let reason = reason.lines().next().unwrap_or("").trim();
    format!(
        "could not install {} ({reason}); install it with: {}",
        tool.label(),
        tool.install_command(root)
    )
}

/// Whether `rustup target list --installed` output lists `target`.
pub fn target_listed(installed: &str, target: &str) -> bool {
    installed.lines().any(|l| l.trim() == target)
}

/// The one line a user reads when the wasm32 target could not be added.
pub fn target_failed_line(reason: &str) -> String {
    let reason = reason.lines().next().unwrap_or("").trim();
    format!(
        "could not add the {WASM32} target ({reason}); add it with: rustup target add {WASM32} \
         (without rustup, install your toolchain's rust-std for {WASM32})"
    )
}

/// Add the wasm32 target to the active toolchain when it is missing.
pub fn ensure_wasm32_target() -> Result<()> {
    let listed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    let installed = match listed {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        Ok(out) => {
            let line = target_failed_line(&String::from_utf8_lossy(&out.stderr));
            eprintln!("{line}");
            bail!(line)
        }
        Err(err) => {
            let line = target_failed_line(&format!("cannot run rustup: {err}"));
            eprintln!("{line}");
            bail!(line)
        }
    };
    if target_listed(&installed, WASM32) {
        eprintln!("{WASM32}: installed");
        return Ok(());
    }
    if let Err(err) = run("rustup", &["target", "add", WASM32]) {
        let line = target_failed_line(&format!("{err:#}"));
        eprintln!("{line}");
        bail!(line)
    }
    Ok(())
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

/// Install `tool` into the tools root unless the right version is there; a failure prints
/// [`install_failed_line`] and returns it as the error.
pub fn ensure(tool: &Tool) -> Result<()> {
    if let Some(found) = version_of(tool.bin()) {
        if tool.version_matches(&found) {
            eprintln!("{}: {found}", tool.bin());
            return Ok(());
        }
        eprintln!("{}: found `{found}`, want {}", tool.bin(), tool.label());
    }
    let root = tools_root();
    if let Err(err) = install(tool, &root) {
        let line = install_failed_line(tool, &root, &format!("{err:#}"));
        eprintln!("{line}");
        bail!(line)
    }
    match version_of(tool.bin()) {
        Some(found) if tool.version_matches(&found) => {
            eprintln!("{}: {found}", tool.bin());
            Ok(())
        }
        found => {
            let reason = format!(
                "after installing, `{} --version` says {found:?}",
                tool.bin()
            );
            let line = install_failed_line(tool, &root, &reason);
            eprintln!("{line}");
            bail!(line)
        }
    }
}

fn install(tool: &Tool, root: &Path) -> Result<()> {
    let root_str = root.to_str().context("the tools root is not UTF-8")?;
    let cargo = PathBuf::from(crate::env_cargo());
    let log = log_path(&format!("install-{}", tool.bin()));
    match tool {
        Tool::Trunk => run_logged(
            &cargo,
            &[
                "install",
                "trunk",
                "--version",
                TRUNK,
                "--locked",
                "--root",
                root_str,
            ],
            &log,
            &[],
        ),
        // Not --locked: its lock pins a crate version the registry no longer has.
        Tool::WasmBindgen(v) => run_logged(
            &cargo,
            &[
                "install",
                "wasm-bindgen-cli",
                "--version",
                v,
                "--root",
                root_str,
            ],
            &log,
            &[],
        ),
        Tool::WasmOpt => {
            if Command::new("npm").arg("--version").output().is_ok() {
                install_wasm_opt_npm(root, &log)
            } else {
                eprintln!("npm not found: building wasm-opt {WASM_OPT_CRATE} with cargo (slow)");
                run_logged(
                    &cargo,
                    &[
                        "install",
                        "wasm-opt",
                        "--version",
                        WASM_OPT_CRATE,
                        "--locked",
                        "--root",
                        root_str,
                    ],
                    &log,
                    &[],
                )
            }
        }
    }
}

/// npm's binaryen into `ROOT/npm`, its `wasm-opt` linked as `ROOT/bin/wasm-opt`.
fn install_wasm_opt_npm(root: &Path, log: &Path) -> Result<()> {
    let prefix = root.join("npm");
    std::fs::create_dir_all(&prefix)
        .with_context(|| format!("cannot create {}", prefix.display()))?;
    let prefix_str = prefix.to_str().context("the tools root is not UTF-8")?;
    let package = format!("binaryen@{BINARYEN_NPM}");
    run_logged(
        Path::new("npm"),
        &[
            "install",
            "--prefix",
            prefix_str,
            "--no-audit",
            "--no-fund",
            "--no-save",
            &package,
        ],
        log,
        &[],
    )?;
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).with_context(|| format!("cannot create {}", bin.display()))?;
    let link = bin.join("wasm-opt");
    if link.symlink_metadata().is_ok() {
        std::fs::remove_file(&link)
            .with_context(|| format!("cannot replace {}", link.display()))?;
    }
    let script = Path::new("..")
        .join("npm")
        .join("node_modules")
        .join("binaryen")
        .join("bin")
        .join("wasm-opt");
    std::os::unix::fs::symlink(&script, &link)
        .with_context(|| format!("cannot link {}", link.display()))
}

/// wasm-bindgen-cli (= Cargo.lock's wasm-bindgen) and wasm-opt: what xtask's page builder needs.
pub fn ensure_page_tools() -> Result<()> {
    ensure(&Tool::WasmOpt)?;
    ensure(&Tool::WasmBindgen(locked_wasm_bindgen()?))
}

/// Trunk, wasm-bindgen-cli and wasm-opt (`cargo xtask tools`).
pub fn ensure_web_tools() -> Result<()> {
    ensure_page_tools()?;
    ensure(&Tool::Trunk)
}

/// Install cargo-fuzz when missing or at another version.
pub fn ensure_cargo_fuzz() -> Result<()> {
    if !version_of("cargo-fuzz").is_some_and(|v| v.split_whitespace().any(|w| w == CARGO_FUZZ)) {
        let root = tools_root();
        let root = root.to_str().context("tools root is not UTF-8")?;
        crate::cargo(&[
            "install",
            "cargo-fuzz",
            "--version",
            CARGO_FUZZ,
            "--root",
            root,
            "--locked",
        ])?;
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

/// The environment every build of the page's wasm gets (xtask's and trunk's alike): the
/// panic locations the wasm keeps name dependency sources by their absolute path under
/// `$CARGO_HOME`, so it is remapped to `/cargo` (cargo adds this to `.cargo/config.toml`'s
/// wasm32 flags) and the page is the same on every machine for a given rustc.
pub fn wasm_build_env() -> Result<Vec<(&'static str, String)>> {
    let home = match std::env::var_os("CARGO_HOME") {
        Some(h) => PathBuf::from(h),
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .context("neither CARGO_HOME nor HOME is set")?
            .join(".cargo"),
    };
    let home = home.to_str().context("CARGO_HOME is not UTF-8")?;
    if home.contains(char::is_whitespace) {
        bail!("CARGO_HOME `{home}` has a space, which cargo's RUSTFLAGS variables cannot carry");
    }
    Ok(vec![(
        "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS",
        format!("--remap-path-prefix={home}=/cargo"),
    )])
}

/// `trunk build --release` in `web/` into `dist` (a path relative to `web/`; offline: `cargo
/// fetch` first).
pub fn trunk_build(dist: &str) -> Result<()> {
    ensure_web_tools()?;
    crate::cargo(&["fetch"])?;
    let status = Command::new(tools_root().join("bin").join("trunk"))
        .args(["build", "--release", "--dist", dist])
        .current_dir("web")
        .env("PATH", path_with_tools())
        // The same wasm flags as xtask's builder (`web::build_wasm`), so the pages agree.
        .envs(wasm_build_env()?)
        .status()
        .context("cannot start trunk")?;
    if !status.success() {
        bail!("trunk build --release failed ({status})");
    }
    Ok(())
}

/// `trunk serve` in `web/` (the development server, a debug build into `dist`, relative to
/// `web/`) must serve the page and its wasm: started, polled until both answer 200 (at most
/// `limit`), then stopped.
pub fn trunk_serve_check(dist: &str, limit: std::time::Duration) -> Result<()> {
    ensure(&Tool::Trunk)?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    let port = listener
        .local_addr()
        .context("cannot find a free port")?
        .port();
    drop(listener);
    let log = log_path("trunk-serve");
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let out =
        std::fs::File::create(&log).with_context(|| format!("cannot open {}", log.display()))?;
    let err = out
        .try_clone()
        .with_context(|| format!("cannot open {}", log.display()))?;
    let port_str = port.to_string();
    eprintln!(
        "$ trunk serve --no-autoreload --port {port} --dist {dist}  (output: {})",
        log.display()
    );
    let mut child = Command::new(tools_root().join("bin").join("trunk"))
        .args([
            "serve",
            "--no-autoreload",
            "--port",
            &port_str,
            "--dist",
            dist,
        ])
        .current_dir("web")
        .env("PATH", path_with_tools())
        .envs(wasm_build_env()?)
        .stdout(out)
        .stderr(err)
        .spawn()
        .context("cannot start trunk serve")?;
    let started = std::time::Instant::now();
    let result = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Err(anyhow::anyhow!(
                "trunk serve exited with {status}; see {}",
                log.display()
            ));
        }
        let page = crate::serve::get_status(port, "/").ok();
        let wasm = crate::serve::get_status(port, "/candle-trace-viewer_bg.wasm").ok();
        if page == Some(200) && wasm == Some(200) {
            eprintln!(
                "trunk serve: / and the wasm answer 200 after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            break Ok(());
        }
        if started.elapsed() > limit {
            break Err(anyhow::anyhow!(
                "trunk serve did not serve the page within {} s (/: {page:?}, wasm: {wasm:?}); see {}",
                limit.as_secs(),
                log.display()
            ));
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    };
    // Stop the server this function started.
    let _ = child.kill();
    let _ = child.wait();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trunk_matches_only_its_pinned_version() {
        assert!(Tool::Trunk.version_matches("trunk 0.21.14"));
        assert!(!Tool::Trunk.version_matches("trunk 0.21.1"));
        assert!(!Tool::Trunk.version_matches("trunk 0.22.0"));
        assert!(!Tool::Trunk.version_matches(""));
    }

    #[test]
    fn wasm_bindgen_matches_the_locked_version_exactly() {
        let tool = Tool::WasmBindgen("0.2.130".into());
        assert!(tool.version_matches("wasm-bindgen 0.2.130"));
        // Built from git, the CLI appends the commit.
        assert!(tool.version_matches("wasm-bindgen 0.2.130 (abc1234)"));
        assert!(!tool.version_matches("wasm-bindgen 0.2.13"));
        assert!(!tool.version_matches("wasm-bindgen 0.2.131"));
        assert!(!tool.version_matches("wasm2es6js 0.2.130"));
    }

    #[test]
    fn wasm_opt_matches_binaryen_116_from_npm_or_cargo_but_not_debian() {
        // npm's binaryen@116.0.0 and the wasm-opt crate 0.116.1 both print this line.
        assert!(Tool::WasmOpt.version_matches("wasm-opt version 116 (version_116)"));
        // Debian bookworm's binaryen, which breaks the page.
        assert!(!Tool::WasmOpt.version_matches("wasm-opt version 108"));
        assert!(!Tool::WasmOpt.version_matches("wasm-opt version 1160"));
        assert!(!Tool::WasmOpt.version_matches("wasm-opt version 117 (version_117)"));
    }

    #[test]
    fn locked_version_reads_the_package_entry() {
        let lock = "[[package]]\nname = \"wasm-bindgen-shared\"\nversion = \"0.2.99\"\n\n\
                    [[package]]\nname = \"wasm-bindgen\"\nversion = \"0.2.130\"\n";
        assert_eq!(
            locked_version(lock, "wasm-bindgen").as_deref(),
            Some("0.2.130")
        );
        assert_eq!(locked_version(lock, "trunk"), None);
    }

    #[test]
    fn a_missing_target_is_noticed() {
        let with = "wasm32-unknown-unknown\nx86_64-unknown-linux-gnu\n";
        let without = "x86_64-unknown-linux-gnu\n";
        assert!(target_listed(with, WASM32));
        assert!(!target_listed(without, WASM32));
        // Another wasm target is not the one the page needs.
        assert!(!target_listed("wasm32-wasip1\n", WASM32));
        assert!(!target_listed("", WASM32));
    }

    #[test]
    fn install_failures_are_one_line_with_the_command_to_run() {
        let root = Path::new("/home/a/.cache/candle-trace/tools");
        let tool = Tool::WasmBindgen("0.2.130".into());
        let line = install_failed_line(&tool, root, "`cargo install` exited with 101\nmore");
        assert_eq!(
            line,
            "could not install wasm-bindgen 0.2.130 (`cargo install` exited with 101); install it \
             with: cargo install wasm-bindgen-cli --version 0.2.130 --root \
             /home/a/.cache/candle-trace/tools"
        );
        let line = install_failed_line(&Tool::WasmOpt, root, "cannot start npm");
        assert!(!line.contains('\n'));
        assert!(line.starts_with("could not install wasm-opt (binaryen 116) (cannot start npm)"));
        assert!(line.ends_with(
            "npm install --prefix /home/a/.cache/candle-trace/tools/npm binaryen@116.0.0 && ln -sf \
             ../npm/node_modules/binaryen/bin/wasm-opt /home/a/.cache/candle-trace/tools/bin/wasm-opt"
        ));
        let line = target_failed_line("error: could not download\ndetails");
        assert_eq!(
            line,
            "could not add the wasm32-unknown-unknown target (error: could not download); add it \
             with: rustup target add wasm32-unknown-unknown (without rustup, install your \
             toolchain's rust-std for wasm32-unknown-unknown)"
        );
    }
}
