//! The crates meant for crates.io, packaged as `cargo publish` would: `cargo package` for every
//! workspace member without `publish = false` (which builds each from its packaged sources,
//! its siblings taken from the packages just made), then each `.crate` checked against
//! crates.io's 10 MB upload limit, and the CLI's checked to carry its embedded page. The other
//! members (`publish = false`) are left out: they are never uploaded, and their sources reach
//! outside their folders.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// crates.io refuses a `.crate` larger than this (10 MiB).
pub const CRATES_IO_LIMIT_BYTES: u64 = 10 * 1024 * 1024;

/// The `(name, version)` of every member of `cargo metadata --no-deps`'s JSON that may be
/// published (`"publish": null`; `publish = false` is `[]`), in the metadata's order.
pub fn publishable(metadata: &serde_json::Value) -> Result<Vec<(String, String)>> {
    let packages = metadata
        .get("packages")
        .and_then(|p| p.as_array())
        .context("cargo metadata has no packages")?;
    let mut out = Vec::new();
    for p in packages {
        let field = |k: &str| {
            p.get(k)
                .and_then(|v| v.as_str())
                .map(str::to_string)
                .with_context(|| format!("a package of cargo metadata has no {k}"))
        };
        if p.get("publish").is_none_or(|v| v.is_null()) {
            out.push((field("name")?, field("version")?));
        }
    }
    Ok(out)
}

/// Remove what an earlier `cargo package` left unpacked of these crates.
///
/// To build a package whose sibling is not on crates.io, cargo puts the siblings just packaged
/// in a local registry and unpacks them under `$CARGO_HOME/registry/src/-HASH/NAME-VERSION`;
/// it never unpacks a version again once that folder exists, so without this the CLI was
/// verified against the schema of the first run (same version, older code).
fn forget_unpacked(crates: &[(String, String)]) -> Result<()> {
    let home = match std::env::var_os("CARGO_HOME") {
        Some(h) => std::path::PathBuf::from(h),
        None => std::env::var_os("HOME")
            .map(std::path::PathBuf::from)
            .context("neither CARGO_HOME nor HOME is set")?
            .join(".cargo"),
    };
    let src = home.join("registry").join("src");
    let Ok(registries) = std::fs::read_dir(&src) else {
        return Ok(());
    };
    for registry in registries.flatten() {
        // A local registry's folder has no host before its hash.
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for (name, version) in crates {
            let unpacked = registry.path().join(format!("{name}-{version}"));
            if unpacked.is_dir() {
                eprintln!(
                    "removing {} (unpacked by an earlier cargo package)",
                    unpacked.display()
                );
                std::fs::remove_dir_all(&unpacked)
                    .with_context(|| format!("cannot remove {}", unpacked.display()))?;
            }
        }
    }
    Ok(())
}

/// Remove `target`'s fingerprints of these crates, so that each is built again.
fn forget_builds(target: &Path, crates: &[(String, String)]) -> Result<()> {
    let fingerprints = target.join("debug").join(".fingerprint");
    let Ok(entries) = std::fs::read_dir(&fingerprints) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // `NAME-HASH`, the hash 16 hex digits.
        let Some((crate_name, hash)) = name.rsplit_once('-') else {
            continue;
        };
        if hash.len() == 16 && crates.iter().any(|(n, _)| n == crate_name) {
            std::fs::remove_dir_all(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// What is wrong with a packaged crate of `bytes` bytes, if anything.
pub fn size_problem(name: &str, bytes: u64) -> Option<String> {
    (bytes > CRATES_IO_LIMIT_BYTES).then(|| {
        format!(
            "{name}'s package is {bytes} bytes, over crates.io's limit of {CRATES_IO_LIMIT_BYTES} \
             (10 MiB): leave files out with `exclude` in its Cargo.toml"
        )
    })
}

/// `cargo package` of every publishable member, and each package's size checked.
pub fn check() -> Result<()> {
    let out = Command::new(crate::env_cargo())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("cargo metadata printed no JSON")?;
    let crates = publishable(&metadata)?;
    if crates.is_empty() {
        bail!("no workspace member may be published: is `publish = false` set everywhere?");
    }
    // A target folder of its own, whose builds of these crates are forgotten first: cargo
    // takes a registry crate's build as current while its version is the same, and the
    // siblings come from a registry here (see `forget_unpacked`).
    let target = crate::web::target_dir()?.join("package-check");
    forget_unpacked(&crates)?;
    forget_builds(&target, &crates)?;
    let target_str = target.to_str().context("the target path is not UTF-8")?;
    // Uncommitted changes are packaged too: the check is about what the packages hold and
    // whether they build, not about the working tree.
    let mut args = vec!["package", "--allow-dirty"];
    for (name, _) in &crates {
        args.extend(["-p", name.as_str()]);
    }
    crate::run_with(
        &crate::env_cargo(),
        &args,
        &[("CARGO_TARGET_DIR", target_str)],
    )?;
    let dir = target.join("package");
    let mut problems = Vec::new();
    for (name, version) in &crates {
        let file = dir.join(format!("{name}-{version}.crate"));
        let bytes = std::fs::metadata(&file)
            .with_context(|| format!("cargo package made no {}", file.display()))?
            .len();
        eprintln!("{}: {bytes} bytes", display(&file));
        problems.extend(size_problem(name, bytes));
    }
    problems.extend(cli_page_problems()?);
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    Ok(())
}

/// The CLI's package must carry the page it embeds: every `cli/page/*.gz` listed by `cargo
/// package --list` (a pattern in `exclude` or `.gitignore` could drop them silently, and the
/// package would still build, without its page).
fn cli_page_problems() -> Result<Vec<String>> {
    let out = Command::new(crate::env_cargo())
        .args([
            "package",
            "--list",
            "--allow-dirty",
            "-p",
            "candle-trace-cli",
        ])
        .output()
        .context("cannot run cargo package --list")?;
    if !out.status.success() {
        bail!(
            "cargo package --list failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let page: Vec<String> = crate::web::files_under(Path::new(crate::embed::PAGE_DIR))?
        .iter()
        .map(|p| {
            let parts: Vec<String> = p
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            format!("page/{}", parts.join("/"))
        })
        .filter(|p| p.ends_with(".gz"))
        .collect();
    Ok(missing_from_listing(&listed, &page))
}

/// The files of `wanted` that a `cargo package --list` output does not list, as problems.
pub fn missing_from_listing(listed: &str, wanted: &[String]) -> Vec<String> {
    if wanted.is_empty() {
        return vec![String::from(
            "cli/page/ holds no page: run `cargo xtask page --embed`",
        )];
    }
    wanted
        .iter()
        .filter(|w| !listed.lines().any(|l| l.trim() == w.as_str()))
        .map(|w| {
            format!("candle-trace-cli's package leaves out {w}: the binary would carry no page")
        })
        .collect()
}

fn display(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_members_without_publish_false_are_packaged() -> Result<()> {
        let metadata = serde_json::json!({"packages": [
            {"name": "candle-trace-schema", "version": "0.1.0", "publish": null},
            {"name": "candle-trace-viewer", "version": "0.1.0", "publish": []},
            {"name": "candle-trace-cli", "version": "0.1.0"},
            {"name": "private-registry-only", "version": "0.2.0", "publish": ["mine"]},
        ]});
        assert_eq!(
            publishable(&metadata)?,
            [
                ("candle-trace-schema".to_string(), "0.1.0".to_string()),
                ("candle-trace-cli".to_string(), "0.1.0".to_string()),
            ]
        );
        Ok(())
    }

    #[test]
    fn the_cli_package_must_list_every_page_file() {
        let wanted = vec![
            "page/index.html.gz".to_string(),
            "page/a/b.js.gz".to_string(),
        ];
        assert!(
            missing_from_listing("Cargo.toml\npage/index.html.gz\npage/a/b.js.gz\n", &wanted)
                .is_empty()
        );
        assert_eq!(
            missing_from_listing("Cargo.toml\npage/index.html.gz\n", &wanted),
            ["candle-trace-cli's package leaves out page/a/b.js.gz: the binary would carry no page"]
        );
        assert_eq!(missing_from_listing("", &[]).len(), 1);
    }

    #[test]
    fn a_package_over_10_mib_is_a_problem() {
        assert_eq!(size_problem("c", CRATES_IO_LIMIT_BYTES), None);
        assert!(size_problem("c", CRATES_IO_LIMIT_BYTES + 1)
            .is_some_and(|p| p.starts_with("c's package is 10485761 bytes")));
    }

    /// The workspace's own manifests: schema, capture and the CLI are published, the rest not.
    #[test]
    fn the_workspace_publishes_schema_capture_and_the_cli() -> Result<()> {
        let out = Command::new(env!("CARGO"))
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()?;
        assert!(out.status.success());
        let metadata: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let mut names: Vec<String> = publishable(&metadata)?
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "candle-trace-capture",
                "candle-trace-cli",
                "candle-trace-schema"
            ]
        );
        Ok(())
    }
}
