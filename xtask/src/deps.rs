//! The dependency guard (`cargo xtask deps`, part of `ci`): which crate may depend on which, and
//! no import circle between the modules of a crate, and the schema's two trees layered.
//!
//! - **Crates.** `cargo tree -e normal,build` of each package must not name a denied package
//!   (after rerun's `denied_sdk_deps`): capture links into training binaries, so nothing web and
//!   no CLI crates; the viewer is a wasm page, so no candle and no capture; the schema is below
//!   everything.
//! - **Modules.** Within each crate, the graph "module A names `crate::B…` or `super::B`" must
//!   have no cycle. Comments, string and character literals and `#[cfg(test)] mod … { … }` blocks
//!   are left out: a test may read a document through the reader it tests.
//! - **Layers.** In the schema, no module under `format` names one under `analysis`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Packages that must never appear in a package's normal or build dependency tree, built with
/// `--all-features` unless features are named.
const DENIED: &[(&str, Features, &[&str])] = &[
    (
        "candle-trace-schema",
        Features::All,
        &[
            "candle-core",
            "candle-nn",
            "cudarc",
            "leptos",
            "web-sys",
            "candle-trace-capture",
            "candle-trace-viewer",
            "candle-trace-cli",
        ],
    ),
    (
        "candle-trace-capture",
        Features::All,
        &[
            "leptos",
            "web-sys",
            "wasm-bindgen",
            "js-sys",
            "candle-trace-viewer",
            "candle-trace-cli",
            "clap",
        ],
    ),
    // The library a training binary links compiles no CLI crates. (With the opt-in `otlp`
    // feature, anyhow comes in as a build-time dependency of prost's derive macro.)
    (
        "candle-trace-capture",
        Features::Some("candle,cuda,nvtx"),
        &["clap", "anyhow"],
    ),
    (
        "candle-trace-viewer",
        Features::All,
        &["candle-core", "candle-nn", "cudarc", "candle-trace-capture"],
    ),
    (
        "candle-trace-cli",
        Features::All,
        &[
            "candle-trace-capture",
            "candle-trace-viewer",
            "candle-core",
            "leptos",
        ],
    ),
];

/// The features a tree is taken with.
#[derive(Clone, Copy, Debug)]
enum Features {
    /// `--all-features`.
    All,
    /// `--features LIST`.
    Some(&'static str),
}

/// The crates whose modules must form no import circle (their `src` folders).
const ACYCLIC: &[&str] = &["schema", "capture", "cli", "viewer", "xtask"];

/// Module trees that may name each other only one way: `(crate, lower, upper)` means modules
/// under `lower` never name one under `upper` (schema's analyses read the format, not the reverse).
const LAYERS: &[(&str, &str, &str)] = &[("schema", "format", "analysis")];

/// All three checks; the first failure stops with what was found.
pub fn guard() -> Result<()> {
    for (package, features, denied) in DENIED {
        let found = denied_in_tree(package, *features, denied)?;
        if !found.is_empty() {
            bail!("{package} ({features:?}) must not depend on {found:?}");
        }
        eprintln!("{package} ({features:?}): none of {denied:?} in its tree");
    }
    for krate in ACYCLIC {
        let src = Path::new(krate).join("src");
        let files = read_sources(&src)?;
        let cycles = module_cycles(&files);
        if !cycles.is_empty() {
            let text: Vec<String> = cycles.iter().map(|c| c.join(" -> ")).collect();
            bail!(
                "{krate}: import circle(s) between modules: {}",
                text.join("; ")
            );
        }
        eprintln!("{krate}: {} modules, no import circle", files.len());
    }
    for (krate, lower, upper) in LAYERS {
        let files = read_sources(&Path::new(krate).join("src"))?;
        let wrong = layer_violations(&files, lower, upper);
        if !wrong.is_empty() {
            let text: Vec<String> = wrong.iter().map(|(f, t)| format!("{f} -> {t}")).collect();
            bail!(
                "{krate}: {lower} must not name {upper}: {}",
                text.join("; ")
            );
        }
        eprintln!("{krate}: nothing under {lower} names {upper}");
    }
    Ok(())
}

fn denied_in_tree(package: &str, features: Features, denied: &[&str]) -> Result<Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let features: &[&str] = match features {
        Features::All => &["--all-features"],
        Features::Some(list) => &["--features", list],
    };
    let output = Command::new(cargo)
        .args(["tree", "-p", package])
        .args(features)
        .args(["-e", "normal,build", "--prefix", "none", "--format", "{p}"])
        .output()
        .with_context(|| format!("cannot run cargo tree for {package}"))?;
    if !output.status.success() {
        bail!(
            "cargo tree -p {package} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let tree = String::from_utf8_lossy(&output.stdout);
    let mut found: Vec<String> = tree
        .lines()
        .skip(1) // the package itself
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| denied.contains(name))
        .map(str::to_string)
        .collect();
    found.sort();
    found.dedup();
    Ok(found)
}

/// Every `.rs` file under `src`, keyed by module path (`format::chrome`; the crate root is "").
fn read_sources(src: &Path) -> Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    let mut stack: Vec<PathBuf> = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap_or(&path).with_extension("");
                let mut parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if parts
                    .last()
                    .is_some_and(|p| p == "lib" || p == "main" || p == "mod")
                {
                    parts.pop();
                }
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                files.insert(parts.join("::"), text);
            }
        }
    }
    Ok(files)
}

/// Which modules each module of `files` (module path → source) names, itself, its ancestors and
/// the crate root left out.
fn module_edges(files: &BTreeMap<String, String>) -> BTreeMap<&str, BTreeSet<&str>> {
    let modules: BTreeSet<&str> = files.keys().map(String::as_str).collect();
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (module, text) in files {
        let code = code_only(text);
        let targets = edges.entry(module.as_str()).or_default();
        for path in referenced_paths(&code, module) {
            if let Some(target) = resolve(&modules, &path) {
                // A parent module naming its own child (`pub use child::X`) is not a circle.
                let is_ancestor = module.starts_with(&format!("{target}::"));
                if target != module && !target.is_empty() && !is_ancestor {
                    targets.insert(target);
                }
            }
        }
    }
    edges
}

/// The import cycles among `files` (module path → source), each as its modules in order with
/// the first repeated at the end; empty when there is none.
pub fn module_cycles(files: &BTreeMap<String, String>) -> Vec<Vec<String>> {
    strongly_connected(&module_edges(files))
}

/// Every `(from, to)` where a module in the tree `lower` (or `lower` itself) names one in the
/// tree `upper`: the arrows a layered crate forbids.
pub fn layer_violations(
    files: &BTreeMap<String, String>,
    lower: &str,
    upper: &str,
) -> Vec<(String, String)> {
    let within = |m: &str, tree: &str| m == tree || m.starts_with(&format!("{tree}::"));
    module_edges(files)
        .into_iter()
        .filter(|(from, _)| within(from, lower))
        .flat_map(|(from, to)| {
            to.into_iter()
                .filter(|t| within(t, upper))
                .map(move |t| (from.to_string(), t.to_string()))
        })
        .collect()
}

/// The longest module in `modules` that `path` (`a::b::Item`) starts with.
fn resolve<'m>(modules: &BTreeSet<&'m str>, path: &str) -> Option<&'m str> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .find_map(|n| modules.get(parts[..n].join("::").as_str()).copied())
}

/// Absolute module paths named in `code`: `crate::a::b`, the items of `use crate::{a::b, c}`,
/// and `super::x` resolved against `module`.
fn referenced_paths(code: &str, module: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while let Some(at) = code[i..].find("crate::").map(|p| p + i) {
        let preceded = at > 0 && is_ident(bytes[at - 1]);
        i = at + "crate::".len();
        if preceded {
            continue;
        }
        if code[i..].starts_with('{') {
            let end = matching_brace(code, i).unwrap_or(code.len());
            for item in code[i + 1..end].split([',', '{', '}']) {
                let item = item.trim();
                if !item.is_empty() {
                    out.push(item.split_whitespace().next().unwrap_or(item).to_string());
                }
            }
            // Nested groups (`a::{b, c}`) name `a` too.
            let mut prefix = String::new();
            for ch in code[i + 1..end].chars() {
                match ch {
                    '{' => out.push(prefix.trim().trim_end_matches("::").to_string()),
                    ',' | '}' => prefix.clear(),
                    c => prefix.push(c),
                }
            }
        } else {
            out.push(path_at(code, i));
        }
    }
    let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
    let mut i = 0;
    while let Some(at) = code[i..].find("super::").map(|p| p + i) {
        let preceded = at > 0 && is_ident(bytes[at - 1]);
        i = at + "super::".len();
        if preceded {
            continue;
        }
        let rest = path_at(code, i);
        out.push(if parent.is_empty() {
            rest
        } else {
            format!("{parent}::{rest}")
        });
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The `a::b::c` path that starts at byte `i`.
fn path_at(code: &str, i: usize) -> String {
    let rest = &code[i..];
    let end = rest
        .char_indices()
        .find(|&(k, c)| {
            !(c.is_alphanumeric()
                || c == '_'
                || (c == ':' && rest[k..].starts_with("::"))
                || (c == ':' && k > 0 && rest[..k].ends_with(':')))
        })
        .map_or(rest.len(), |(k, _)| k);
    rest[..end].trim_end_matches(':').to_string()
}

/// Index of the `}` closing the `{` at `open`.
fn matching_brace(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(open + k);
                }
            }
            _ => {}
        }
    }
    None
}

/// `text` without comments, string and character literals (their contents become blanks) and
/// `#[cfg(test)] mod name { … }` blocks.
pub fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut k = 0;
    while k < chars.len() {
        let c = chars[k];
        let next = chars.get(k + 1).copied();
        if c == '/' && next == Some('/') {
            while k < chars.len() && chars[k] != '\n' {
                k += 1;
            }
        } else if c == '/' && next == Some('*') {
            k += 2;
            while k + 1 < chars.len() && !(chars[k] == '*' && chars[k + 1] == '/') {
                k += 1;
            }
            k += 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !prev_is_ident(&chars, k)
        {
            // Raw string: r"…", r#"…"#, …
            let mut hashes = 0;
            let mut j = k + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                k += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (1..=hashes).all(|h| chars.get(j + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            k = j;
        } else if c == '"' {
            k += 1;
            while k < chars.len() && chars[k] != '"' {
                if chars[k] == '\\' {
                    k += 1;
                }
                k += 1;
            }
            k += 1;
            out.push_str("\"\"");
        } else if c == '\'' && is_char_literal(&chars, k) {
            k += 1;
            if chars.get(k) == Some(&'\\') {
                k += 1;
            }
            while k < chars.len() && chars[k] != '\'' {
                k += 1;
            }
            k += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            k += 1;
        }
    }
    drop_test_modules(&out)
}

fn prev_is_ident(chars: &[char], k: usize) -> bool {
    k > 0 && (chars[k - 1].is_alphanumeric() || chars[k - 1] == '_')
}

/// `'x'`, `'\n'`, `'\u{..}'` — not a lifetime (`'a`).
fn is_char_literal(chars: &[char], k: usize) -> bool {
    match chars.get(k + 1) {
        Some('\\') => true,
        Some(_) => chars.get(k + 2) == Some(&'\''),
        None => false,
    }
}

fn drop_test_modules(code: &str) -> String {
    let mut code = code.to_string();
    while let Some(at) = code.find("#[cfg(test)]") {
        let after = &code[at + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        let is_mod = trimmed.starts_with("mod ") || trimmed.starts_with("pub mod ");
        let Some(open) = after.find('{').filter(|_| is_mod) else {
            // Not a module: drop only the attribute.
            code.replace_range(at..at + "#[cfg(test)]".len(), "");
            continue;
        };
        let open = at + "#[cfg(test)]".len() + open;
        let end = matching_brace(&code, open).map_or(code.len(), |e| e + 1);
        code.replace_range(at..end, "");
    }
    code
}

/// Tarjan's strongly connected components of size > 1, each closed into a cycle path.
fn strongly_connected(edges: &BTreeMap<&str, BTreeSet<&str>>) -> Vec<Vec<String>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(v: &'a str, edges: &BTreeMap<&'a str, BTreeSet<&'a str>>, s: &mut State<'a>) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, edges, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                let first = component[0].clone();
                component.push(first);
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for &v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(v, edges, &mut s);
        }
    }
    s.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_of(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(m, t)| (m.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn a_circle_through_use_paths_is_found() {
        let files = crate_of(&[
            ("", "pub mod a; pub mod b; pub mod c;"),
            ("a", "use crate::b::Thing;"),
            ("b", "pub fn f() -> crate::c::X { todo() }"),
            ("c", "use crate::{a::Other, d};"),
        ]);
        assert_eq!(module_cycles(&files), vec![vec!["a", "b", "c", "a"]]);
    }

    #[test]
    fn layered_modules_have_no_circle() {
        let files = crate_of(&[
            ("", "pub mod format; pub mod analysis; pub use format::Doc;"),
            ("format", "pub mod doc; pub use doc::Doc;"),
            (
                "format::doc",
                "use super::super::format::Other; pub struct Doc;",
            ),
            ("analysis", "use crate::format::doc::Doc;"),
        ]);
        assert!(module_cycles(&files).is_empty());
    }

    #[test]
    fn comments_strings_and_test_modules_are_not_imports() {
        let files = crate_of(&[
            ("", ""),
            ("a", "use crate::b::X;"),
            (
                "b",
                "// see crate::a::Y\n/* crate::a::Z */ const S: &str = \"crate::a::W\";\n\
                 const R: &str = r#\"crate::a::V\"#; const C: char = '{';\n\
                 #[cfg(test)]\nmod tests { use crate::a::Y; fn f() { let _ = '}'; } }\n\
                 fn g<'a>(x: &'a str) -> &'a str { x }",
            ),
        ]);
        assert!(module_cycles(&files).is_empty());
        // The same reference outside the test module is a circle.
        let files = crate_of(&[
            ("", ""),
            ("a", "use crate::b::X;"),
            ("b", "use crate::a::Y;"),
        ]);
        assert_eq!(module_cycles(&files), vec![vec!["a", "b", "a"]]);
    }

    #[test]
    fn super_paths_resolve_against_the_parent() {
        let files = crate_of(&[
            ("", ""),
            ("p", "pub mod x; pub mod y;"),
            ("p::x", "use super::y::Y;"),
            ("p::y", "use super::x::X;"),
        ]);
        assert_eq!(module_cycles(&files), vec![vec!["p::x", "p::y", "p::x"]]);
    }

    #[test]
    fn an_arrow_from_the_lower_tree_to_the_upper_is_a_violation() {
        let files = crate_of(&[
            ("format", "pub mod doc;"),
            ("format::doc", "pub struct Doc;"),
            (
                "format::chrome",
                "use crate::format::doc::Doc; fn f() -> crate::analysis::sum::S { todo() }",
            ),
            ("analysis", "pub mod sum;"),
            (
                "analysis::sum",
                "use crate::format::doc::Doc; pub struct S;",
            ),
        ]);
        assert_eq!(
            layer_violations(&files, "format", "analysis"),
            vec![("format::chrome".to_string(), "analysis::sum".to_string())]
        );
        // The other way round is the allowed direction.
        assert_eq!(layer_violations(&files, "analysis", "format").len(), 1);
        assert!(layer_violations(&files, "analysis", "nothing").is_empty());
    }

    #[test]
    fn the_schema_layers_hold() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for (krate, lower, upper) in LAYERS {
            let files = read_sources(&root.join(krate).join("src")).expect("sources");
            assert!(
                files.keys().any(|m| m.starts_with(lower)),
                "{krate} has {lower}"
            );
            assert!(
                files.keys().any(|m| m.starts_with(upper)),
                "{krate} has {upper}"
            );
            assert_eq!(layer_violations(&files, lower, upper), vec![], "{krate}");
        }
    }

    #[test]
    fn the_workspace_crates_have_no_circle() {
        // Run from xtask/: the workspace root is one level up.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for krate in ACYCLIC {
            let files = read_sources(&root.join(krate).join("src")).expect("sources");
            assert!(files.len() > 1, "{krate}");
            assert_eq!(module_cycles(&files), Vec::<Vec<String>>::new(), "{krate}");
        }
    }
}
