//! The viewer page carried inside the binary: every file of the built page (`web/dist`),
//! gzip-compressed, from `cli/page/` (see `build.rs`; `cargo xtask page --embed` refreshes it).
//! `view` serves these bytes as they are (`Content-Encoding: gzip`); `report` inlines them.

use std::io::Read as _;

/// One file of the page.
#[derive(Debug)]
pub struct PageFile {
    /// Its path under the page's root, `/` between folders (`index.html`,
    /// `assets/example.trace6.jsonl`).
    pub path: &'static str,
    /// Its bytes, gzip-compressed.
    pub gzip: &'static [u8],
}

/// Every file of the embedded page, in path order.
pub const FILES: &[PageFile] = include!(concat!(env!("OUT_DIR"), "/page_files.rs"));

/// The embedded file at `path`.
pub fn file(path: &str) -> Option<&'static PageFile> {
    FILES.iter().find(|f| f.path == path)
}

/// The uncompressed bytes of a gzip stream.
pub fn gunzip(gzip: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(gzip.len() * 3);
    flate2::read::GzDecoder::new(gzip).read_to_end(&mut out)?;
    Ok(out)
}

/// The embedded file at `path`, uncompressed; an error names it when the build has no such
/// file (a binary built without the page).
pub fn read(path: &str) -> anyhow::Result<Vec<u8>> {
    let f = file(path).ok_or_else(|| {
        anyhow::anyhow!(
            "this candle-trace was built without the viewer page ({path} is missing from cli/page/; \
             `cargo xtask page --embed` makes it)"
        )
    })?;
    gunzip(f.gzip).map_err(|e| anyhow::anyhow!("the embedded {path} is damaged: {e}"))
}

/// The media type of a page file, from its extension.
pub fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("wasm") => "application/wasm",
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        Some("jsonl") => "application/x-ndjson",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed expectation is the report

    use super::*;

    /// The page the binary carries is whole: the files `web/index.html` names, each a gzip
    /// stream that decompresses.
    #[test]
    fn the_embedded_page_has_its_files_and_each_decompresses() {
        for path in [
            "index.html",
            "loader.js",
            "worker.js",
            "style.css",
            "candle-trace-viewer.js",
            "candle-trace-viewer_bg.wasm",
            "candle-trace-worker.js",
            "candle-trace-worker_bg.wasm",
            "assets/example.trace6.jsonl",
        ] {
            let bytes = read(path).unwrap();
            assert!(!bytes.is_empty(), "{path}");
        }
        for wasm in ["candle-trace-viewer_bg.wasm", "candle-trace-worker_bg.wasm"] {
            assert_eq!(&read(wasm).unwrap()[..4], b"\0asm", "{wasm}");
        }
        let index = String::from_utf8(read("index.html").unwrap()).unwrap();
        assert!(index.contains("loader.js"));
        let mut paths: Vec<&str> = FILES.iter().map(|f| f.path).collect();
        paths.sort_unstable();
        assert_eq!(paths, FILES.iter().map(|f| f.path).collect::<Vec<_>>());
    }
}
