//! The dependency guard (`cargo xtask deps`, part of `ci`): which crate may depend on which, and
//! no import circle between the modules of a crate, and the schema's two trees layered.
//!
//! - **Crates.** `cargo tree -e normal,build` of each package must not name a denied package
//!   (after rerun's `denied_sdk_deps`): capture links into training binaries, so nothing web and
//!   no CLI crates; the viewer is a wasm page, so no candle and no capture; the schema is below
//!   everything.
//! - **Modules.** Within each crate, no circle between sibling modules at any level, where a
//!   module counts with everything under it (`graph.rs` says how paths are resolved). Comments,
//!   string and character literals and `#[cfg(test)] mod … { … }` blocks are left out
//!   (`source.rs`): a test may read a document through the reader it tests.
//! - **Layers.** In the schema, no module under `format` names one under `analysis`.

mod graph;
mod source;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use graph::Crate;
use source::read_sources;

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
        let files = read_sources(&Path::new(krate).join("src"))?;
        let circles = Crate::new(&files).circles();
        if !circles.is_empty() {
            let text: Vec<String> = circles
                .iter()
                .map(|c| format!("{} ({})", c.modules.join(" -> "), c.because.join("; ")))
                .collect();
            bail!(
                "{krate}: import circle(s) between sibling modules: {}",
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

/// Every `(from, to)` where a module in the tree `lower` (or `lower` itself) names one in the
/// tree `upper`: the arrows a layered crate forbids.
fn layer_violations(
    files: &BTreeMap<String, String>,
    lower: &str,
    upper: &str,
) -> Vec<(String, String)> {
    let within = |m: &str, tree: &str| m == tree || m.starts_with(&format!("{tree}::"));
    Crate::new(files)
        .references()
        .into_iter()
        .filter(|(from, _)| within(from, lower))
        .flat_map(|(from, to)| {
            to.into_iter()
                .filter(|t| within(t, upper))
                .map(move |t| (from.to_string(), t))
        })
        .collect()
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
    fn an_arrow_from_the_lower_tree_to_the_upper_is_a_violation() {
        let files = crate_of(&[
            (
                "",
                "pub mod format; pub mod analysis; pub use analysis::sum::S;",
            ),
            ("format", "pub mod doc;"),
            ("format::doc", "pub struct Doc;"),
            (
                "format::chrome",
                "use crate::format::doc::Doc; fn f() -> crate::analysis::sum::S { todo() }",
            ),
            ("format::memory", "fn f(_: crate::S) {}"),
            ("analysis", "pub mod sum;"),
            (
                "analysis::sum",
                "use crate::format::doc::Doc; pub struct S;",
            ),
        ]);
        assert_eq!(
            layer_violations(&files, "format", "analysis"),
            vec![
                ("format::chrome".to_string(), "analysis::sum".to_string()),
                // Through the root's re-export.
                ("format::memory".to_string(), "analysis::sum".to_string()),
            ]
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
            assert_eq!(Crate::new(&files).circles(), vec![], "{krate}");
        }
    }
}
