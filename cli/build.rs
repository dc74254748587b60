//! Build script: the table of the viewer page embedded in the binary.
//!
//! `page/` holds one gzip file per file of the built page (`cargo xtask page --embed` writes
//! them from `web/dist`, and CI checks they equal a fresh build). This script lists them, in
//! name order, as `OUT_DIR/page_files.rs`: a slice of `PageFile { path, gzip }` whose bytes are
//! `include_bytes!` of each file, so the binary carries the page and a user's install needs no
//! web toolchain. `src/page.rs` includes it.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=page");
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let out = std::env::var_os("OUT_DIR").map(PathBuf::from);
    let (Some(manifest), Some(out)) = (manifest, out) else {
        panic!("cargo sets CARGO_MANIFEST_DIR and OUT_DIR for build scripts");
    };
    let root = manifest.join("page");
    let mut files = Vec::new();
    if root.is_dir() {
        gz_files(&root, &root, &mut files);
    }
    files.sort();
    let mut table = String::from("&[\n");
    for (rel, path) in &files {
        table.push_str(&format!(
            "    PageFile {{ path: {rel:?}, gzip: include_bytes!({:?}) }},\n",
            path.display().to_string()
        ));
    }
    table.push_str("]\n");
    if let Err(e) = std::fs::write(out.join("page_files.rs"), table) {
        panic!("cannot write page_files.rs: {e}");
    }
}

/// Every `*.gz` file under `dir`: its path relative to `root` without `.gz` (with `/`
/// between folders), and its absolute path.
fn gz_files(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => panic!("cannot list {}: {e}", dir.display()),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            gz_files(root, &path, out);
            continue;
        }
        let Ok(rel) = path.strip_prefix(root) else {
            continue;
        };
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if let Some(rel) = parts.join("/").strip_suffix(".gz") {
            out.push((rel.to_string(), path.clone()));
        }
    }
}
