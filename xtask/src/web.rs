//! The page's build without trunk: the same steps `trunk build --release` takes for
//! `web/index.html`, read from the same `<link data-trunk …>` tags, so the demo needs neither
//! trunk nor its 16-minute install.
//!
//! For each tag, in order, like trunk 0.21:
//! - `rel="rust"`: `cargo build --target wasm32-unknown-unknown --profile P --bin B`,
//!   `wasm-bindgen --target=web --out-name=B --no-typescript`, `wasm-opt -OLEVEL PARAMS`; the
//!   page's tag stays in the page (Trunk.toml's `inject_scripts = false`: `loader.js` starts the
//!   wasm), a worker's (`data-type="worker"`, which must say `data-bindgen-target="web"`) is
//!   removed (`worker.js` starts it); one cargo build per profile makes the binaries;
//! - `rel="css"`: the file copied, the tag replaced by a stylesheet link with trunk's sha384
//!   `integrity`;
//! - `rel="copy-file"` / `rel="copy-dir"`: copied, the tag removed.
//!
//! Every tag gets trunk's `data-trunk-id`. An attribute or a `Trunk.toml` setting this builder
//! does not implement is an error naming its line, never silently ignored: the two builds
//! must not drift, and CI compares their output file by file ([`compare_trees`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use sha2::Digest as _;

use crate::tools::{self, Tool, WASM32};

/// One attribute of a tag: its name and value (`None` for a bare attribute like `data-trunk`).
type Attr = (String, Option<String>);

/// A `<link data-trunk …>` tag of the page.
#[derive(Debug, PartialEq)]
pub struct TrunkLink {
    /// 1-based line of the tag in the HTML file.
    pub line: usize,
    /// Byte range of the whole tag.
    pub span: std::ops::Range<usize>,
    /// The attributes in source order.
    pub attrs: Vec<Attr>,
}

impl TrunkLink {
    fn get(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_deref().unwrap_or(""))
    }
}

/// Every `<link …>` tag with a `data-trunk` attribute, skipping comments.
pub fn trunk_links(html: &str) -> Result<Vec<TrunkLink>> {
    let mut links = Vec::new();
    let mut at = 0;
    while let Some(offset) = html[at..].find('<') {
        let start = at + offset;
        let rest = &html[start..];
        if rest.starts_with("<!--") {
            let end = rest.find("-->").with_context(|| {
                format!("line {}: a comment that never ends", line_of(html, start))
            })?;
            at = start + end + 3;
            continue;
        }
        let is_link = rest.len() > 5
            && rest[1..5].eq_ignore_ascii_case("link")
            && rest[5..].starts_with(|c: char| c.is_ascii_whitespace() || c == '>' || c == '/');
        if !is_link {
            at = start + 1;
            continue;
        }
        let (attrs, len) = parse_tag(&rest[5..]).with_context(|| {
            format!(
                "line {}: a <link> tag that never ends",
                line_of(html, start)
            )
        })?;
        let end = start + 5 + len;
        if attrs.iter().any(|(n, _)| n == "data-trunk") {
            links.push(TrunkLink {
                line: line_of(html, start),
                span: start..end,
                attrs,
            });
        }
        at = end;
    }
    Ok(links)
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte].matches('\n').count() + 1
}

/// The attributes of a tag whose name has been read, and the bytes up to and including `>`.
fn parse_tag(s: &str) -> Option<(Vec<Attr>, usize)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut attrs = Vec::new();
    loop {
        while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b'/') {
            i += 1;
        }
        if i >= bytes.len() {
            return None;
        }
        if bytes[i] == b'>' {
            return Some((attrs, i + 1));
        }
        let name_start = i;
        while i < bytes.len()
            && !matches!(bytes[i], b'=' | b'>' | b'/')
            && !bytes[i].is_ascii_whitespace()
        {
            i += 1;
        }
        let name = s[name_start..i].to_ascii_lowercase();
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < bytes.len() && bytes[i] == b'=' {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            let value = match bytes.get(i)? {
                q @ (b'"' | b'\'') => {
                    let close = s[i + 1..].find(*q as char)?;
                    let v = &s[i + 1..i + 1 + close];
                    i += close + 2;
                    v
                }
                _ => {
                    let v_start = i;
                    while i < bytes.len() && bytes[i] != b'>' && !bytes[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    &s[v_start..i]
                }
            };
            attrs.push((name, Some(value.to_string())));
        } else {
            attrs.push((name, None));
        }
    }
}

/// What the page's `rel="rust"` tag asks for.
#[derive(Debug, PartialEq)]
pub struct RustApp {
    /// The crate's manifest, relative to the HTML file's folder.
    pub manifest: String,
    /// The binary (wasm-bindgen's `--out-name` too).
    pub bin: String,
    /// The cargo profile of release builds.
    pub profile: String,
    /// wasm-opt's level (`z` → `-Oz`).
    pub opt_level: String,
    /// wasm-opt's extra parameters.
    pub opt_params: Vec<String>,
    /// A worker's wasm (`data-type="worker"`): its tag leaves the page.
    pub worker: bool,
}

/// One step of the page's build, from one tag.
#[derive(Debug, PartialEq)]
pub enum Asset {
    /// Build, bind and optimise the wasm.
    Rust(RustApp),
    /// A stylesheet.
    Css(String),
    /// A file copied as is.
    CopyFile(String),
    /// A folder copied as is.
    CopyDir(String),
}

/// The attributes trunk reads on a `rel="rust"` tag that this builder implements.
const RUST_ATTRS: &[&str] = &[
    "data-trunk",
    "rel",
    "href",
    "data-bin",
    "data-cargo-profile-release",
    "data-wasm-opt",
    "data-wasm-opt-params",
    "data-type",
    "data-bindgen-target",
];

/// What each tag asks for; any attribute or `rel` this builder does not implement is an error
/// naming the tag's line in `file`.
pub fn plan(file: &str, links: &[TrunkLink]) -> Result<Vec<Asset>> {
    let mut assets = Vec::new();
    for link in links {
        let at = || format!("{file}:{}", link.line);
        let rel = link.get("rel").unwrap_or("");
        let allowed: &[&str] = match rel {
            "rust" => RUST_ATTRS,
            _ => &["data-trunk", "rel", "href"],
        };
        if let Some((name, _)) = link
            .attrs
            .iter()
            .find(|(n, _)| !allowed.contains(&n.as_str()))
        {
            bail!(
                "{}: xtask's page builder does not implement `{name}` on a rel=\"{rel}\" tag; \
                 implement it in xtask/src/web.rs like trunk does, or drop it",
                at()
            );
        }
        let href = || {
            link.get("href")
                .map(str::to_string)
                .with_context(|| format!("{}: the rel=\"{rel}\" tag has no href", at()))
        };
        assets.push(match rel {
            "rust" => {
                let need = |name: &str| {
                    link.get(name)
                        .map(str::to_string)
                        .with_context(|| format!("{}: the rel=\"rust\" tag needs {name}", at()))
                };
                let worker = match link.get("data-type") {
                    None | Some("main") => false,
                    Some("worker") => true,
                    Some(other) => bail!("{}: unknown data-type=\"{other}\"", at()),
                };
                // Trunk binds a worker as `no-modules` unless told otherwise; this builder
                // writes ES modules only.
                match (link.get("data-bindgen-target"), worker) {
                    (Some("web"), _) | (None, false) => {}
                    (target, _) => bail!(
                        "{}: xtask's page builder binds with --target=web only (data-bindgen-target={target:?}); a worker must say data-bindgen-target=\"web\"",
                        at()
                    ),
                }
                RustApp {
                    worker,
                    manifest: href()?,
                    bin: need("data-bin")?,
                    profile: need("data-cargo-profile-release")?,
                    opt_level: need("data-wasm-opt")?,
                    opt_params: link
                        .get("data-wasm-opt-params")
                        .unwrap_or("")
                        .split_whitespace()
                        .map(str::to_string)
                        .collect(),
                }
                .into()
            }
            "css" => Asset::Css(href()?),
            "copy-file" => Asset::CopyFile(href()?),
            "copy-dir" => Asset::CopyDir(href()?),
            other => bail!(
                "{}: xtask's page builder does not implement rel=\"{other}\"; implement it in \
                 xtask/src/web.rs like trunk does",
                at()
            ),
        });
    }
    if assets
        .iter()
        .filter(|a| matches!(a, Asset::Rust(app) if !app.worker))
        .count()
        != 1
    {
        bail!("{file}: the page needs exactly one rel=\"rust\" tag that is not a worker's");
    }
    let mut bins: Vec<&str> = rust_apps(&assets).map(|a| a.bin.as_str()).collect();
    bins.sort_unstable();
    if bins.windows(2).any(|w| w[0] == w[1]) {
        bail!("{file}: two rel=\"rust\" tags build the same binary");
    }
    let first = rust_apps(&assets).next();
    if rust_apps(&assets).any(|a| first.is_some_and(|f| f.manifest != a.manifest)) {
        bail!("{file}: xtask's page builder builds every rel=\"rust\" tag from one crate: they need the same href");
    }
    Ok(assets)
}

impl From<RustApp> for Asset {
    fn from(app: RustApp) -> Self {
        Asset::Rust(app)
    }
}

/// The `Trunk.toml` settings this builder assumes, as `key = value` lines.
const TRUNK_SETTINGS: &[&str] = &[
    "public_url = \"./\"",
    "filehash = false",
    "inject_scripts = false",
];

/// Check that `Trunk.toml` says what the builder assumes, and sets nothing under `[build]`
/// that changes the output (minify, no_sri, pattern_*).
pub fn check_trunk_toml(text: &str) -> Result<()> {
    for want in TRUNK_SETTINGS {
        if !text.lines().any(|l| l.trim() == *want) {
            bail!("web/Trunk.toml: xtask's page builder assumes `{want}`; teach xtask/src/web.rs the new setting");
        }
    }
    for (n, line) in text.lines().enumerate() {
        let key = line.split('=').next().unwrap_or("").trim();
        if [
            "minify",
            "no_sri",
            "pattern_script",
            "pattern_preload",
            "inject_autoloader",
        ]
        .contains(&key)
        {
            bail!(
                "web/Trunk.toml:{}: xtask's page builder does not implement `{key}`",
                n + 1
            );
        }
    }
    Ok(())
}

/// Trunk's `integrity` value for a file's bytes: `sha384-` and the standard base64 digest.
pub fn sri_sha384(bytes: &[u8]) -> String {
    let digest = sha2::Sha384::digest(bytes);
    format!(
        "sha384-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The tag with trunk's `data-trunk-id` added, as lol_html writes a tag with an attribute set
/// (checked against trunk 0.21.14's output): bare attributes stay bare, the others become
/// `name="value"`, the new one goes last, and the original `/>` is kept.
fn tag_with_id(link: &TrunkLink, id: usize, self_closing: bool) -> String {
    let mut tag = String::from("<link");
    for (name, value) in &link.attrs {
        tag.push(' ');
        tag.push_str(name);
        if let Some(value) = value {
            tag.push_str("=\"");
            tag.push_str(value);
            tag.push('"');
        }
    }
    tag.push_str(&format!(" data-trunk-id=\"{id}\""));
    tag.push_str(if self_closing { " />" } else { ">" });
    tag
}

/// The page with each tag replaced by what trunk writes for it; `integrity` maps a css href
/// to its file's [`sri_sha384`].
pub fn rewrite_html(
    html: &str,
    links: &[TrunkLink],
    assets: &[Asset],
    integrity: &BTreeMap<String, String>,
) -> Result<String> {
    let mut out = String::with_capacity(html.len());
    let mut at = 0;
    for (id, (link, asset)) in links.iter().zip(assets).enumerate() {
        out.push_str(&html[at..link.span.start]);
        let original = &html[link.span.clone()];
        match asset {
            Asset::Rust(app) if app.worker => {}
            Asset::Rust(_) => out.push_str(&tag_with_id(link, id, original.ends_with("/>"))),
            Asset::Css(href) => {
                let file = file_name(href)?;
                let sri = integrity
                    .get(href)
                    .with_context(|| format!("no integrity for {href}"))?;
                out.push_str(&format!(
                    "<link rel=\"stylesheet\" href=\"./{file}\" integrity=\"{sri}\"/>"
                ));
            }
            Asset::CopyFile(_) | Asset::CopyDir(_) => {}
        }
        at = link.span.end;
    }
    out.push_str(&html[at..]);
    Ok(out)
}

fn file_name(href: &str) -> Result<String> {
    Path::new(href)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .with_context(|| format!("{href} names no file"))
}

/// Cargo's target folder for this workspace.
pub(crate) fn target_dir() -> Result<PathBuf> {
    let out = Command::new(crate::env_cargo())
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("cargo metadata printed no JSON")?;
    meta.get("target_directory")
        .and_then(|t| t.as_str())
        .map(PathBuf::from)
        .context("cargo metadata has no target_directory")
}

/// Build the viewer's wasm binaries with cargo, one build per cargo profile the tags name (the
/// part of the page's build that needs no web tools; the demo starts it before the tools are
/// installed), cargo's output into `log` when given. Returns each `rel="rust"` tag's wasm, in
/// the page's order.
pub fn build_wasm(web: &Path, log: Option<&Path>) -> Result<Vec<PathBuf>> {
    build_wasm_with(web, log, None)
}

/// [`build_wasm`] with the rustup toolchain `toolchain` rather than the active one.
pub fn build_wasm_with(
    web: &Path,
    log: Option<&Path>,
    toolchain: Option<&str>,
) -> Result<Vec<PathBuf>> {
    let (_, _, assets) = read_page(web)?;
    let app = rust_app(&assets)?;
    let manifest = web.join(&app.manifest);
    let manifest_str = manifest
        .to_str()
        .context("the manifest path is not UTF-8")?;
    let env = tools::wasm_build_env()?;
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for profile in profiles(&assets) {
        let mut args = vec![
            "build",
            "--target",
            WASM32,
            "--manifest-path",
            manifest_str,
            "--profile",
            profile,
        ];
        for app in rust_apps(&assets).filter(|a| a.profile == profile) {
            args.extend(["--bin", app.bin.as_str()]);
        }
        let (program, args): (String, Vec<&str>) = match toolchain {
            Some(t) => (
                "rustup".into(),
                [&["run", t, "cargo"][..], &args[..]].concat(),
            ),
            None => (crate::env_cargo(), args.to_vec()),
        };
        match log {
            Some(log) => crate::steps::run_logged(Path::new(&program), &args, log, &env)?,
            None => crate::run_with(&program, &args, &env)?,
        }
    }
    let target = target_dir()?.join(WASM32);
    rust_apps(&assets)
        .map(|app| {
            let wasm = target.join(&app.profile).join(format!("{}.wasm", app.bin));
            if !wasm.is_file() {
                bail!("cargo built no {}", wasm.display());
            }
            Ok(wasm)
        })
        .collect()
}

fn read_page(web: &Path) -> Result<(String, Vec<TrunkLink>, Vec<Asset>)> {
    let toml_path = web.join("Trunk.toml");
    let toml = std::fs::read_to_string(&toml_path)
        .with_context(|| format!("cannot read {}", toml_path.display()))?;
    check_trunk_toml(&toml)?;
    let index = web.join("index.html");
    let html = std::fs::read_to_string(&index)
        .with_context(|| format!("cannot read {}", index.display()))?;
    let name = index.display().to_string();
    let links = trunk_links(&html).with_context(|| format!("in {name}"))?;
    let assets = plan(&name, &links)?;
    Ok((html, links, assets))
}

/// The page's own `rel="rust"` tag (not a worker's).
fn rust_app(assets: &[Asset]) -> Result<&RustApp> {
    rust_apps(assets)
        .find(|app| !app.worker)
        .context("the page has no rel=\"rust\" tag")
}

/// The cargo profiles the `rel="rust"` tags name, each once, in the page's order.
fn profiles(assets: &[Asset]) -> Vec<&str> {
    let mut profiles: Vec<&str> = Vec::new();
    for app in rust_apps(assets) {
        if !profiles.contains(&app.profile.as_str()) {
            profiles.push(&app.profile);
        }
    }
    profiles
}

/// Every `rel="rust"` tag, in the page's order.
fn rust_apps(assets: &[Asset]) -> impl Iterator<Item = &RustApp> {
    assets.iter().filter_map(|a| match a {
        Asset::Rust(app) => Some(app),
        _ => None,
    })
}

/// Build the page from `web/index.html` into `dist`, with the wasm binaries from
/// [`build_wasm`] and the tools from [`tools::ensure_page_tools`].
pub fn assemble(web: &Path, wasms: &[PathBuf], dist: &Path) -> Result<()> {
    let (html, links, assets) = read_page(web)?;
    let apps: Vec<&RustApp> = rust_apps(&assets).collect();
    if apps.len() != wasms.len() {
        bail!(
            "{} wasm binaries for {} rel=\"rust\" tags",
            wasms.len(),
            apps.len()
        );
    }
    let work = target_dir()?.join("xtask-page");

    let staging = dist.with_extension("staging");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("cannot remove {}", staging.display()))?;
    }
    std::fs::create_dir_all(&staging)
        .with_context(|| format!("cannot create {}", staging.display()))?;
    for (app, wasm) in apps.iter().zip(wasms) {
        // The page's own work folder is where it always was; a worker's is named after it.
        let work = if app.worker {
            work.join(&app.bin)
        } else {
            work.clone()
        };
        let (js, bg) = bind_and_optimise(app, wasm, &work)?;
        copy(&js, &staging.join(format!("{}.js", app.bin)))?;
        copy(&bg, &staging.join(format!("{}_bg.wasm", app.bin)))?;
        let snippets = work.join("wasm-bindgen").join("snippets");
        if snippets.is_dir() {
            copy_dir(&snippets, &staging.join("snippets"))?;
        }
    }
    let mut integrity = BTreeMap::new();
    for asset in &assets {
        match asset {
            Asset::Rust(_) => {}
            Asset::Css(href) | Asset::CopyFile(href) => {
                let to = staging.join(file_name(href)?);
                copy(&web.join(href), &to)?;
                if matches!(asset, Asset::Css(_)) {
                    let bytes = std::fs::read(&to)
                        .with_context(|| format!("cannot read {}", to.display()))?;
                    integrity.insert(href.clone(), sri_sha384(&bytes));
                }
            }
            Asset::CopyDir(href) => copy_dir(&web.join(href), &staging.join(file_name(href)?))?,
        }
    }
    let page = rewrite_html(&html, &links, &assets, &integrity)?;
    let index = staging.join("index.html");
    std::fs::write(&index, page).with_context(|| format!("cannot write {}", index.display()))?;
    if dist.exists() {
        std::fs::remove_dir_all(dist)
            .with_context(|| format!("cannot remove {}", dist.display()))?;
    }
    std::fs::rename(&staging, dist)
        .with_context(|| format!("cannot move {} to {}", staging.display(), dist.display()))
}

/// wasm-bindgen and wasm-opt, reused while the cargo wasm, the tools and the options are the
/// same as last time (the warm demo skips both). Returns the JS glue and the optimised wasm.
fn bind_and_optimise(app: &RustApp, wasm: &Path, work: &Path) -> Result<(PathBuf, PathBuf)> {
    let bindgen_dir = work.join("wasm-bindgen");
    let js = bindgen_dir.join(format!("{}.js", app.bin));
    let optimised = work.join(format!("{}_bg.wasm", app.bin));
    let meta =
        std::fs::metadata(wasm).with_context(|| format!("cannot read {}", wasm.display()))?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let key = format!(
        "{} {} {modified} wasm-bindgen {} wasm-opt {} -O{} {}",
        wasm.display(),
        meta.len(),
        tools::locked_wasm_bindgen()?,
        tools::WASM_OPT_RELEASE,
        app.opt_level,
        app.opt_params.join(" ")
    );
    let stamp = work.join("stamp");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == key)
        && js.is_file()
        && optimised.is_file()
    {
        eprintln!(
            "wasm-bindgen and wasm-opt: reusing {} (same input)",
            work.display()
        );
        return Ok((js, optimised));
    }
    let _ = std::fs::remove_file(&stamp);
    if bindgen_dir.exists() {
        std::fs::remove_dir_all(&bindgen_dir)
            .with_context(|| format!("cannot remove {}", bindgen_dir.display()))?;
    }
    std::fs::create_dir_all(&bindgen_dir)
        .with_context(|| format!("cannot create {}", bindgen_dir.display()))?;
    let bin = tools::tools_root().join("bin");
    let wasm_str = wasm.to_str().context("the wasm path is not UTF-8")?;
    let out_dir = format!("--out-dir={}", bindgen_dir.display());
    let out_name = format!("--out-name={}", app.bin);
    tool(
        &bin.join(Tool::WasmBindgen(String::new()).bin()),
        &[
            "--target=web",
            &out_dir,
            &out_name,
            wasm_str,
            "--no-typescript",
        ],
    )?;
    let bound = bindgen_dir.join(format!("{}_bg.wasm", app.bin));
    let output = format!("--output={}", optimised.display());
    let level = format!("-O{}", app.opt_level);
    let bound_str = bound.to_str().context("the wasm path is not UTF-8")?;
    let mut args = vec![output.as_str(), level.as_str(), bound_str];
    args.extend(app.opt_params.iter().map(String::as_str));
    tool(&bin.join(Tool::WasmOpt.bin()), &args)?;
    std::fs::write(&stamp, key).with_context(|| format!("cannot write {}", stamp.display()))?;
    Ok((js, optimised))
}

fn tool(program: &Path, args: &[&str]) -> Result<()> {
    eprintln!("$ {} {}", program.display(), args.join(" "));
    let status = Command::new(program)
        .args(args)
        .env("PATH", tools::path_with_tools())
        .status()
        .with_context(|| format!("cannot start {}", program.display()))?;
    if !status.success() {
        bail!("`{}` exited with {status}", program.display());
    }
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to)
        .map(|_| ())
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot list {}", from.display()))?
    {
        let entry = entry.with_context(|| format!("cannot list {}", from.display()))?;
        let path = entry.path();
        let dest = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &dest)?;
        } else {
            copy(&path, &dest)?;
        }
    }
    Ok(())
}

/// The whole page into `dist`: the wasm32 target and the tools when missing, the wasm, then
/// [`assemble`].
pub fn build(web: &Path, dist: &Path) -> Result<()> {
    tools::ensure_wasm32_target()?;
    tools::ensure_page_tools()?;
    let wasms = build_wasm(web, None)?;
    assemble(web, &wasms, dist)
}

/// Every file under `root`, relative, sorted.
pub(crate) fn files_under(root: &Path) -> Result<Vec<PathBuf>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        for entry in
            std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let path = entry
                .with_context(|| format!("cannot list {}", dir.display()))?
                .path();
            if path.is_dir() {
                walk(root, &path, out)?;
            } else if let Ok(rel) = path.strip_prefix(root) {
                out.push(rel.to_path_buf());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.sort();
    Ok(out)
}

/// How two built pages differ: files only in one, and files whose bytes differ. Empty when the
/// two folders hold the same files with the same bytes.
pub fn compare_trees(a: &Path, b: &Path) -> Result<Vec<String>> {
    let (fa, fb) = (files_under(a)?, files_under(b)?);
    let mut diffs = Vec::new();
    for f in &fa {
        if !fb.contains(f) {
            diffs.push(format!("only in {}: {}", a.display(), f.display()));
        } else {
            let (x, y) = (std::fs::read(a.join(f))?, std::fs::read(b.join(f))?);
            if x != y {
                diffs.push(format!(
                    "{} differs ({} vs {} bytes)",
                    f.display(),
                    x.len(),
                    y.len()
                ));
            }
        }
    }
    for f in fb.iter().filter(|f| !fa.contains(f)) {
        diffs.push(format!("only in {}: {}", b.display(), f.display()));
    }
    Ok(diffs)
}

/// The page into `web/dist` with xtask's builder, no trunk needed.
pub fn build_viewer() -> Result<()> {
    build(Path::new("web"), &Path::new("web").join("dist"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "<!doctype html>\n<html>\n  <head>\n    <!-- <link data-trunk rel=\"css\" href=\"old.css\"> -->\n    <link data-trunk rel=\"rust\" href=\"../viewer/Cargo.toml\" data-bin=\"v\" data-cargo-profile-release=\"wasm-release\" data-wasm-opt=\"z\" data-wasm-opt-params=\"--enable-bulk-memory  --enable-sign-ext\" />\n    <link data-trunk rel=\"css\" href=\"style.css\" />\n    <link data-trunk rel=\"copy-file\" href=\"loader.js\" />\n    <link data-trunk rel=\"copy-dir\" href=\"assets\" />\n    <link rel=\"icon\" href=\"data:,\" />\n  </head>\n</html>\n";

    #[test]
    fn reads_the_trunk_tags_with_their_lines_and_skips_comments() -> Result<()> {
        let links = trunk_links(PAGE)?;
        assert_eq!(links.len(), 4);
        assert_eq!(
            links.iter().map(|l| l.line).collect::<Vec<_>>(),
            [5, 6, 7, 8]
        );
        assert_eq!(links[0].get("data-trunk"), Some(""));
        assert_eq!(links[0].get("data-bin"), Some("v"));
        assert_eq!(links[1].get("href"), Some("style.css"));
        assert!(PAGE[links[3].span.clone()].starts_with("<link data-trunk rel=\"copy-dir\""));
        assert!(PAGE[links[3].span.clone()].ends_with("/>"));
        Ok(())
    }

    #[test]
    fn plans_each_tag() -> Result<()> {
        let assets = plan("index.html", &trunk_links(PAGE)?)?;
        assert_eq!(
            assets,
            [
                Asset::Rust(RustApp {
                    manifest: "../viewer/Cargo.toml".into(),
                    bin: "v".into(),
                    profile: "wasm-release".into(),
                    opt_level: "z".into(),
                    opt_params: vec!["--enable-bulk-memory".into(), "--enable-sign-ext".into()],
                    worker: false,
                }),
                Asset::Css("style.css".into()),
                Asset::CopyFile("loader.js".into()),
                Asset::CopyDir("assets".into()),
            ]
        );
        Ok(())
    }

    #[test]
    fn an_unimplemented_attribute_or_rel_names_its_line() -> Result<()> {
        let page = PAGE.replace("data-bin=\"v\"", "data-bin=\"v\" data-keep-debug");
        let err = plan("web/index.html", &trunk_links(&page)?)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "web/index.html:5: xtask's page builder does not implement `data-keep-debug` on a \
                 rel=\"rust\" tag; implement it in xtask/src/web.rs like trunk does, or drop it"
            )
        );
        let page = PAGE.replace("rel=\"copy-dir\"", "rel=\"icon\"");
        let err = plan("web/index.html", &trunk_links(&page)?)
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.starts_with(
            "web/index.html:8: xtask's page builder does not implement rel=\"icon\""
        )));
        // The file ends inside the tag.
        let cut = PAGE
            .find("<link data-trunk rel=\"copy-dir\"")
            .context("no copy-dir")?;
        let page = format!("{}<link data-trunk rel=\"css\" href=", &PAGE[..cut]);
        let err = trunk_links(&page).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("line 8: a <link> tag that never ends"));
        Ok(())
    }

    #[test]
    fn trunk_toml_settings_the_builder_does_not_know_are_errors() {
        let ok = "[build]\ntarget = \"index.html\"\npublic_url = \"./\"\nfilehash = false\ninject_scripts = false\n";
        assert!(check_trunk_toml(ok).is_ok());
        let err = check_trunk_toml(&ok.replace("filehash = false", "filehash = true"))
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("assumes `filehash = false`")));
        let err = check_trunk_toml(&format!("{ok}minify = \"on_release\"\n"))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("web/Trunk.toml:6: xtask's page builder does not implement `minify`")
        );
    }

    #[test]
    fn sri_is_sha384_in_standard_base64() {
        // `printf abc | openssl dgst -sha384 -binary | base64`
        assert_eq!(
            sri_sha384(b"abc"),
            "sha384-ywB1P0WjXou1oD1pmsZQBycsMqsO3tFjGotgWkP/W+2AhgcroefMI1i67KE0yCWn"
        );
    }

    #[test]
    fn rewrites_the_tags_as_trunk_does() -> Result<()> {
        let links = trunk_links(PAGE)?;
        let assets = plan("index.html", &links)?;
        let integrity = BTreeMap::from([("style.css".to_string(), "sha384-X".to_string())]);
        let page = rewrite_html(PAGE, &links, &assets, &integrity)?;
        let want = "<!doctype html>\n<html>\n  <head>\n    <!-- <link data-trunk rel=\"css\" href=\"old.css\"> -->\n    <link data-trunk rel=\"rust\" href=\"../viewer/Cargo.toml\" data-bin=\"v\" data-cargo-profile-release=\"wasm-release\" data-wasm-opt=\"z\" data-wasm-opt-params=\"--enable-bulk-memory  --enable-sign-ext\" data-trunk-id=\"0\" />\n    <link rel=\"stylesheet\" href=\"./style.css\" integrity=\"sha384-X\"/>\n    \n    \n    <link rel=\"icon\" href=\"data:,\" />\n  </head>\n</html>\n";
        assert_eq!(page, want);
        Ok(())
    }

    #[test]
    fn a_worker_tag_is_built_and_leaves_the_page() -> Result<()> {
        let rust = PAGE
            .lines()
            .find(|l| l.contains("rel=\"rust\""))
            .context("no rust tag")?;
        let worker = rust.replace(
            "data-bin=\"v\"",
            "data-bin=\"w\" data-type=\"worker\" data-bindgen-target=\"web\"",
        );
        let page = PAGE.replace(rust, &format!("{rust}\n{worker}"));
        let links = trunk_links(&page)?;
        let assets = plan("index.html", &links)?;
        let apps: Vec<(&str, bool)> = rust_apps(&assets)
            .map(|a| (a.bin.as_str(), a.worker))
            .collect();
        assert_eq!(apps, [("v", false), ("w", true)]);
        assert_eq!(rust_app(&assets)?.bin, "v");
        let integrity = BTreeMap::from([("style.css".to_string(), "sha384-X".to_string())]);
        let out = rewrite_html(&page, &links, &assets, &integrity)?;
        assert!(out.contains("data-bin=\"v\""));
        assert!(!out.contains("data-bin=\"w\""));
        assert!(out.contains("data-trunk-id=\"0\""));
        // Trunk binds a worker as no-modules unless told: the builder refuses to guess.
        let bare = page.replace(" data-bindgen-target=\"web\"", "");
        assert!(plan("index.html", &trunk_links(&bare)?).is_err());
        // Two page tags, or two tags of one binary, are refused.
        let two = page.replace(" data-type=\"worker\"", "");
        assert!(plan("index.html", &trunk_links(&two)?).is_err());
        let same = page.replace("data-bin=\"w\"", "data-bin=\"v\"");
        assert!(plan("index.html", &trunk_links(&same)?).is_err());
        // The worker in a profile of its own: one build per profile, in the page's order.
        let apart = page.replacen(
            "data-bin=\"w\" data-type=\"worker\" data-bindgen-target=\"web\" data-cargo-profile-release=\"wasm-release\"",
            "data-bin=\"w\" data-type=\"worker\" data-bindgen-target=\"web\" data-cargo-profile-release=\"wasm-worker\"",
            1,
        );
        assert_ne!(apart, page);
        let assets = plan("index.html", &trunk_links(&apart)?)?;
        assert_eq!(profiles(&assets), ["wasm-release", "wasm-worker"]);
        assert_eq!(profiles(&plan("index.html", &links)?), ["wasm-release"]);
        // Another crate's binary is refused: the builder builds one crate.
        let other = apart.replacen("../viewer/Cargo.toml", "../other/Cargo.toml", 1);
        assert!(plan("index.html", &trunk_links(&other)?).is_err());
        Ok(())
    }

    #[test]
    fn the_repository_page_is_one_the_builder_implements() -> Result<()> {
        let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("web");
        let (_, links, assets) = read_page(&web)?;
        assert_eq!(links.len(), assets.len());
        let app = rust_app(&assets)?;
        assert_eq!(app.bin, "candle-trace-viewer");
        assert_eq!(app.profile, "wasm-release");
        assert_eq!(profiles(&assets), ["wasm-release", "wasm-worker"]);
        let workers: Vec<&str> = rust_apps(&assets)
            .filter(|a| a.worker)
            .map(|a| a.bin.as_str())
            .collect();
        assert_eq!(workers, ["candle-trace-worker"]);
        assert!(assets.contains(&Asset::CopyFile("loader.js".into())));
        assert!(assets.contains(&Asset::CopyFile("worker.js".into())));
        Ok(())
    }

    #[test]
    fn compares_two_trees_file_by_file() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for root in [&a, &b] {
            std::fs::create_dir_all(root.join("assets"))?;
            std::fs::write(root.join("index.html"), "<p>same</p>")?;
            std::fs::write(root.join("assets").join("x.jsonl"), "{}\n")?;
        }
        assert_eq!(compare_trees(&a, &b)?, Vec::<String>::new());
        std::fs::write(b.join("index.html"), "<p>other</p>")?;
        std::fs::write(a.join("extra.js"), "")?;
        assert_eq!(
            compare_trees(&a, &b)?,
            [
                format!("only in {}: extra.js", a.display()),
                "index.html differs (11 vs 12 bytes)".to_string(),
            ]
        );
        Ok(())
    }
}
