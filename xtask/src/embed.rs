//! The viewer page the CLI carries: `cli/page/` holds every file of the built page
//! (`web/dist`) gzip-compressed (`NAME.gz`), which `cli/build.rs` embeds in the binary, and
//! `BUILD`, the tools that built it.
//!
//! `cargo xtask page --embed` builds the page and writes the folder; CI's `embedded page is
//! current` stage builds it again with the rustc named in `BUILD` and fails, saying how to
//! refresh it, when any file differs. That works because the build is reproducible byte for
//! byte: the same rustc (pinned by `BUILD`: the check installs that toolchain when it is not
//! the active one), the same crates (Cargo.lock), wasm-bindgen (= Cargo.lock's) and wasm-opt
//! (binaryen 116, pinned in `tools`), `$CARGO_HOME` remapped out of the paths the wasm keeps
//! (its panic locations name dependency sources: see [`crate::web::build_wasm`]), and gzip at a
//! fixed level with no timestamp. The README in the folder is hand-written and left alone.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The embedded page's folder.
pub const PAGE_DIR: &str = "cli/page";

/// The file in [`PAGE_DIR`] naming the tools that built the page.
const BUILD_FILE: &str = "BUILD";

/// How to refresh the folder, for every message that finds it stale.
pub const REFRESH: &str = "refresh it with `cargo xtask page --embed` and commit cli/page/";

/// `bytes` gzip-compressed the same way every time: best compression, no file name, no
/// timestamp, operating system 255 (unknown).
pub fn gzip(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut gz = flate2::GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), flate2::Compression::best());
    gz.write_all(bytes)?;
    Ok(gz.finish()?)
}

/// What the folder should hold for the page in `dist`: `PATH.gz` → its bytes (relative paths
/// with `/`), in path order.
pub fn expected(dist: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for rel in crate::web::files_under(dist)? {
        let bytes = std::fs::read(dist.join(&rel))
            .with_context(|| format!("cannot read {}", dist.join(&rel).display()))?;
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        out.insert(format!("{}.gz", parts.join("/")), gzip(&bytes)?);
    }
    Ok(out)
}

/// Every `*.gz` under `dir` (relative, `/`-separated) with its bytes.
fn present(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    for rel in crate::web::files_under(dir)? {
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let name = parts.join("/");
        if name.ends_with(".gz") {
            let bytes = std::fs::read(dir.join(&rel))
                .with_context(|| format!("cannot read {}", dir.join(&rel).display()))?;
            out.insert(name, bytes);
        }
    }
    Ok(out)
}

/// How the folder's files differ from `want`: missing, left over, or other bytes.
pub fn differences(
    have: &BTreeMap<String, Vec<u8>>,
    want: &BTreeMap<String, Vec<u8>>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, bytes) in want {
        match have.get(name) {
            None => out.push(format!("{name}: missing")),
            Some(b) if b != bytes => out.push(format!(
                "{name}: differs ({} bytes committed, {} built)",
                b.len(),
                bytes.len()
            )),
            Some(_) => {}
        }
    }
    for name in have.keys().filter(|n| !want.contains_key(*n)) {
        out.push(format!("{name}: not in the built page"));
    }
    out
}

/// The tools that build the page now, as `BUILD` records them.
fn build_record(rustc: &str) -> Result<String> {
    Ok(format!(
        "# Written by `cargo xtask page --embed`: what built the page in this folder. CI rebuilds\n\
         # it with this rustc and compares the files byte for byte.\n\
         rustc {rustc}\nwasm-bindgen {}\nwasm-opt {}\n",
        crate::tools::locked_wasm_bindgen()?,
        crate::tools::WASM_OPT_RELEASE
    ))
}

/// The rustc release `BUILD` names (`1.95.0`); a pre-release one is refused (CI installs the
/// toolchain by this name).
pub fn recorded_rustc(build: &str) -> Result<String> {
    let line = build
        .lines()
        .find_map(|l| l.strip_prefix("rustc "))
        .context("cli/page/BUILD names no rustc")?;
    let release = line.split_whitespace().next().unwrap_or("");
    if release.is_empty() || !release.chars().all(|c| c.is_ascii_digit() || c == '.') {
        bail!(
            "cli/page/BUILD names rustc `{line}`: the page must be embedded with a stable release"
        );
    }
    Ok(release.to_string())
}

/// The active rustc's release (`rustc -vV`'s `release:` line).
fn active_rustc(toolchain: Option<&str>) -> Result<String> {
    let mut cmd = match toolchain {
        Some(t) => {
            let mut c = Command::new("rustup");
            c.args(["run", t, "rustc", "-vV"]);
            c
        }
        None => {
            let mut c = Command::new("rustc");
            c.arg("-vV");
            c
        }
    };
    let out = cmd.output().context("cannot run rustc -vV")?;
    if !out.status.success() {
        bail!("rustc -vV failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("release: "))
        .map(|r| r.trim().to_string())
        .context("rustc -vV printed no release")
}

/// Write `dist`'s page into `page_dir`: its `.gz` files replaced, `BUILD` rewritten with
/// `record` ([`build_record`]'s text).
pub fn write(dist: &Path, page_dir: &Path, record: &str) -> Result<()> {
    let want = expected(dist)?;
    for name in present(page_dir)?.keys() {
        let path = page_dir.join(name);
        std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
    }
    for (name, bytes) in &want {
        let path = page_dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let build = page_dir.join(BUILD_FILE);
    std::fs::write(&build, record).with_context(|| format!("cannot write {}", build.display()))?;
    let total: usize = want.values().map(Vec::len).sum();
    eprintln!(
        "{}: {} files, {total} bytes compressed",
        page_dir.display(),
        want.len()
    );
    Ok(())
}

/// `cargo xtask page --embed`: the page built into `web/dist` with the active rustc, then
/// written into [`PAGE_DIR`].
pub fn embed() -> Result<()> {
    crate::web::build_viewer()?;
    write(
        &Path::new("web").join("dist"),
        Path::new(PAGE_DIR),
        &build_record(&active_rustc(None)?)?,
    )
}

/// The toolchain to build with for `recorded`: none (the active one) when it is that release,
/// else `recorded`, installed with the wasm32 target when rustup lacks it.
fn toolchain_for(recorded: &str) -> Result<Option<String>> {
    if active_rustc(None)? == recorded {
        return Ok(None);
    }
    let installed = Command::new("rustup")
        .args(["run", recorded, "rustc", "-vV"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        crate::run(
            "rustup",
            &[
                "toolchain",
                "install",
                recorded,
                "--profile",
                "minimal",
                "--target",
                crate::WASM,
            ],
        )?;
    } else {
        crate::run(
            "rustup",
            &["target", "add", "--toolchain", recorded, crate::WASM],
        )?;
    }
    if active_rustc(Some(recorded))? != recorded {
        bail!("rustup's toolchain {recorded} is not rustc {recorded}");
    }
    Ok(Some(recorded.to_string()))
}

/// CI: the page built again with `BUILD`'s rustc must give [`PAGE_DIR`]'s files byte for byte.
pub fn check() -> Result<()> {
    let page_dir = Path::new(PAGE_DIR);
    let build_path = page_dir.join(BUILD_FILE);
    let build = std::fs::read_to_string(&build_path).with_context(|| {
        format!(
            "cannot read {}: the CLI carries no page; {REFRESH}",
            build_path.display()
        )
    })?;
    let recorded = recorded_rustc(&build)?;
    let toolchain = toolchain_for(&recorded)?;
    crate::tools::ensure_page_tools()?;
    let web = Path::new("web");
    let wasms = crate::web::build_wasm_with(web, None, toolchain.as_deref())?;
    let dist: PathBuf = crate::web::target_dir()?.join("embed-check").join("dist");
    crate::web::assemble(web, &wasms, &dist)?;
    let diffs = differences(&present(page_dir)?, &expected(&dist)?);
    if !diffs.is_empty() {
        bail!(
            "cli/page/ (the viewer page embedded in the CLI) differs from a fresh build of web/ with rustc {recorded}:\n  {}\n{REFRESH}",
            diffs.join("\n  ")
        );
    }
    let want = build_record(&recorded)?;
    if build != want {
        bail!(
            "{} names other tools than this build uses (want:\n{want}); {REFRESH}",
            build_path.display()
        );
    }
    eprintln!("cli/page/: the same files, byte for byte, as a fresh build with rustc {recorded}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_the_same_every_time_and_decompresses() -> Result<()> {
        let data = b"the same bytes every time ".repeat(100);
        let a = gzip(&data)?;
        assert_eq!(a, gzip(&data)?);
        // No timestamp (bytes 4..8), OS 255 (byte 9).
        assert_eq!(&a[..4], &[0x1f, 0x8b, 8, 0]);
        assert_eq!(&a[4..8], &[0, 0, 0, 0]);
        assert_eq!(a[9], 255);
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&a[..]), &mut back)?;
        assert_eq!(back, data);
        Ok(())
    }

    #[test]
    fn differences_name_missing_stale_and_changed_files() {
        let have = BTreeMap::from([
            ("index.html.gz".to_string(), vec![1]),
            ("old.js.gz".to_string(), vec![2]),
            ("style.css.gz".to_string(), vec![3]),
        ]);
        let want = BTreeMap::from([
            ("index.html.gz".to_string(), vec![1]),
            ("new.js.gz".to_string(), vec![4]),
            ("style.css.gz".to_string(), vec![3, 3]),
        ]);
        assert_eq!(
            differences(&have, &want),
            [
                "new.js.gz: missing",
                "style.css.gz: differs (1 bytes committed, 2 built)",
                "old.js.gz: not in the built page",
            ]
        );
        assert!(differences(&want, &want).is_empty());
    }

    #[test]
    fn build_names_a_stable_rustc() -> Result<()> {
        assert_eq!(
            recorded_rustc("# comment\nrustc 1.95.0\nwasm-bindgen 0.2.130\n")?,
            "1.95.0"
        );
        assert!(recorded_rustc("rustc 1.96.0-nightly\n").is_err());
        assert!(recorded_rustc("wasm-opt 116\n").is_err());
        Ok(())
    }

    #[test]
    fn writes_the_folder_and_leaves_its_readme() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let (dist, page) = (dir.path().join("dist"), dir.path().join("page"));
        std::fs::create_dir_all(dist.join("assets"))?;
        std::fs::create_dir_all(&page)?;
        std::fs::write(dist.join("index.html"), "<p>page</p>")?;
        std::fs::write(dist.join("assets").join("x.jsonl"), "{}\n")?;
        std::fs::write(page.join("README.md"), "by hand")?;
        std::fs::write(page.join("stale.js.gz"), "old")?;
        write(&dist, &page, "rustc 1.95.0\n")?;
        assert_eq!(std::fs::read_to_string(page.join("README.md"))?, "by hand");
        assert!(!page.join("stale.js.gz").exists());
        let have = present(&page)?;
        assert_eq!(
            have.keys().collect::<Vec<_>>(),
            ["assets/x.jsonl.gz", "index.html.gz"]
        );
        assert!(differences(&have, &expected(&dist)?).is_empty());
        assert_eq!(
            recorded_rustc(&std::fs::read_to_string(page.join("BUILD"))?)?,
            "1.95.0"
        );
        Ok(())
    }
}
