//! `candle-trace report FILE… -o report.html`: the viewer and the file(s) in one HTML file
//! that opens from `file://` with no server and no network.
//!
//! On a `file://` page the served page's module script, its wasm fetch and its module worker
//! all fail (the page's origin is opaque; Chromium does not even start a module worker from a
//! `blob:` URL there), so the report boots on its own: one inline classic script holds the
//! page's wasm-bindgen glue (its ES module syntax taken out: [`classic_glue`]) and a boot that
//! decompresses the two wasm binaries (the page's and its parsing worker's) and the files (gzip,
//! base64 in `<script type="application/octet-stream">` data blocks) with
//! `DecompressionStream`, compiles each wasm once, starts the parsing workers as classic
//! workers from a `blob:` URL of the worker's glue and boot (a `<script type="text/plain">`
//! the page never runs; each worker is handed its compiled module as its first message), and
//! hands the files to the page as
//! `File`s (`window.candleTraceFiles`), which it opens as if they had been picked together. Its Content-Security-Policy allows exactly that script and that style
//! (by their SHA-256), wasm compilation, `blob:` workers and `data:` images; nothing is
//! fetched. The file is written next to its destination and renamed over it once whole.

use std::io::{Read as _, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use base64::Engine as _;
use sha2::Digest as _;

use crate::page;
use crate::view::{display_name, input_files};

/// The parsing worker's boot, after the worker's wasm-bindgen glue in the same classic script
/// (a `blob:` URL of the text of a `<script type="text/plain">`, which the page never runs):
/// it waits for the compiled wasm, which the page posts first.
const WORKER_BOOT_JS: &str = r#"
// candle-trace report: a parsing worker.
self.onmessage = (event) => {
  self.onmessage = null;
  __wbg_init({ module_or_path: event.data.candleTraceWasm }).catch((err) => {
    self.postMessage({ type: 'failed', message: 'the parsing worker could not start: ' + err });
  });
};
"#;

/// The report's own boot, after the page's wasm-bindgen glue in the same classic script: it
/// starts everything.
const BOOT_JS: &str = r#"
// candle-trace report: everything below comes from this file; nothing is fetched.
{
  const showLoadError = (message) => {
    const p = document.createElement('p');
    p.setAttribute('role', 'alert');
    p.className = 'load-error';
    p.dataset.testid = 'boot-error';
    p.textContent = message;
    document.getElementById('boot-message')?.remove();
    document.body.prepend(p);
  };
  // Validates only where WebAssembly SIMD is supported (see the served page's loader.js).
  const SIMD_PROBE = new Uint8Array([
    0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15,
    253, 98, 11,
  ]);
  const bytesOf = (element) => {
    const text = atob(element.textContent.trim());
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return bytes;
  };
  const gunzip = async (bytes) =>
    new Uint8Array(
      await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).arrayBuffer(),
    );
  if (typeof WebAssembly !== 'object' || !WebAssembly.validate(SIMD_PROBE)) {
    showLoadError(
      'The viewer needs WebAssembly with SIMD, which this browser does not offer (Chrome and Edge 91, Firefox 89 and Safari 16.4 onwards have it).',
    );
  } else if (typeof DecompressionStream !== 'function') {
    showLoadError(
      'This report needs DecompressionStream, which this browser does not offer (Chrome and Edge 80, Firefox 113 and Safari 16.4 onwards have it).',
    );
  } else {
    (async () => {
      const compile = async (id) => WebAssembly.compile(await gunzip(bytesOf(document.getElementById(id))));
      const [wasm, workerWasm] = await Promise.all([compile('candle-trace-wasm'), compile('candle-trace-worker-wasm')]);
      const source = document.getElementById('candle-trace-worker-boot').textContent;
      const workerUrl = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
      // The viewer starts its parsing workers as `new Worker('./worker.js', {type: 'module'})`,
      // which a file:// page cannot load: here each is the worker's script as a classic
      // worker, handed its compiled wasm.
      const PageWorker = globalThis.Worker;
      globalThis.Worker = class extends PageWorker {
        constructor(_url, options) {
          super(workerUrl, { ...options, type: 'classic' });
          this.postMessage({ candleTraceWasm: workerWasm });
        }
      };
      const files = [];
      for (const element of document.querySelectorAll('script[data-candle-trace-file]')) {
        const bytes = await gunzip(bytesOf(element));
        files.push(new File([bytes], element.dataset.name, { type: 'application/x-ndjson' }));
      }
      window.candleTraceFiles = files;
      const exports = await __wbg_init({ module_or_path: wasm });
      window.candleTraceMemory = exports.memory;
      document.getElementById('boot-message')?.remove();
    })().catch((err) => showLoadError('The report could not start: ' + err));
  }
}
"#;

/// What the report adds to the page's style sheet: the example button (a file next to a
/// served page) has nothing to open here.
const REPORT_CSS: &str = "\n[data-testid=\"open-example\"] { display: none; }\n";

/// `text` escaped for an HTML attribute value or text.
fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A CSP source for inline text: `'sha256-…'`.
fn csp_hash(text: &str) -> String {
    let digest = sha2::Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// Inline text that would end its element early (or open a comment the parser treats
/// specially) is refused rather than mangled.
fn check_inline(what: &str, text: &str, end_tag: &str) -> anyhow::Result<()> {
    let lower = text.to_ascii_lowercase();
    for bad in [end_tag, "<!--", "<script"] {
        if lower.contains(bad) {
            anyhow::bail!(
                "the embedded {what} contains `{bad}` and cannot be inlined in the report"
            );
        }
    }
    Ok(())
}

/// The wasm-bindgen glue (`--target web`, an ES module) as a classic script: `export` taken
/// off its declarations, its export list dropped, and `import.meta.url` (read only when no
/// module is given, which the report never does) replaced by the script's location. A form
/// this does not know is an error, never a half-converted script.
pub fn classic_glue(glue: &str) -> anyhow::Result<String> {
    let mut out = String::with_capacity(glue.len());
    for line in glue.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("export {") && trimmed.trim_end().ends_with("};") {
            continue;
        }
        let line = match line.strip_prefix("export ") {
            Some(rest)
                if ["class ", "function ", "async function ", "const ", "let "]
                    .iter()
                    .any(|k| rest.starts_with(k)) =>
            {
                rest
            }
            _ => line,
        };
        out.push_str(&line.replace("import.meta.url", "self.location.href"));
        out.push('\n');
    }
    for (n, line) in out.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("export ")
            || t.starts_with("import ")
            || t.contains("import.meta")
            || t.contains("import(")
        {
            anyhow::bail!(
                "the embedded candle-trace-viewer.js has module syntax the report cannot turn into a classic script (line {}: `{}`)",
                n + 1,
                t.chars().take(80).collect::<String>()
            );
        }
    }
    Ok(out)
}

/// A file's bytes gzip-compressed, read in chunks.
fn gzip_file(path: &Path) -> anyhow::Result<Vec<u8>> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        gz.write_all(&buf[..n])?;
    }
    Ok(gz.finish()?)
}

/// The report's HTML for `files` (each `(name shown, gzip bytes)`), with the page from the
/// binary.
pub fn html(files: &[(String, Vec<u8>)]) -> anyhow::Result<String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let glue = String::from_utf8(page::read("candle-trace-viewer.js")?)
        .context("the embedded candle-trace-viewer.js is not UTF-8")?;
    let css = String::from_utf8(page::read("style.css")?)
        .context("the embedded style.css is not UTF-8")?;
    let worker_glue = String::from_utf8(page::read("candle-trace-worker.js")?)
        .context("the embedded candle-trace-worker.js is not UTF-8")?;
    let wasm = page::file("candle-trace-viewer_bg.wasm")
        .context("this candle-trace was built without the viewer page")?;
    let worker_wasm = page::file("candle-trace-worker_bg.wasm")
        .context("this candle-trace was built without the viewer page")?;
    check_inline("candle-trace-viewer.js", &glue, "</script")?;
    check_inline("candle-trace-worker.js", &worker_glue, "</script")?;
    check_inline("style.css", &css, "</style")?;
    let script = format!("{}{BOOT_JS}", classic_glue(&glue)?);
    let worker_script = format!("{}{WORKER_BOOT_JS}", classic_glue(&worker_glue)?);
    let style = format!("{css}{REPORT_CSS}");
    let csp = format!(
        "default-src 'none'; script-src {} 'wasm-unsafe-eval'; worker-src blob:; style-src {}; img-src data:; base-uri 'none'; form-action 'none'",
        csp_hash(&script),
        csp_hash(&style)
    );
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    let payload: usize = files.iter().map(|(_, b)| b.len() * 4 / 3 + 128).sum();
    let mut out = String::with_capacity(
        script.len()
            + worker_script.len()
            + style.len()
            + (wasm.gzip.len() + worker_wasm.gzip.len()) * 4 / 3
            + payload
            + 4096,
    );
    out.push_str("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\" />\n");
    out.push_str(&format!(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\" />\n"
    ));
    out.push_str("<meta name=\"color-scheme\" content=\"light dark\" />\n");
    out.push_str(&format!(
        "<title>candle-trace report: {}</title>\n",
        html_escape(&names.join(", "))
    ));
    out.push_str("<link rel=\"icon\" href=\"data:,\" />\n");
    out.push_str(&format!("<style>{style}</style>\n"));
    out.push_str("<script type=\"application/octet-stream\" id=\"candle-trace-wasm\">");
    out.push_str(&b64.encode(wasm.gzip));
    out.push_str("</script>\n");
    out.push_str("<script type=\"application/octet-stream\" id=\"candle-trace-worker-wasm\">");
    out.push_str(&b64.encode(worker_wasm.gzip));
    out.push_str("</script>\n");
    // The parsing workers' script: text the page makes a `blob:` worker of, never runs itself.
    out.push_str(&format!(
        "<script type=\"text/plain\" id=\"candle-trace-worker-boot\">{worker_script}</script>\n"
    ));
    for (name, gzip) in files {
        out.push_str(&format!(
            "<script type=\"application/octet-stream\" data-candle-trace-file data-name=\"{}\">",
            html_escape(name)
        ));
        out.push_str(&b64.encode(gzip));
        out.push_str("</script>\n");
    }
    out.push_str(&format!(
        "<script id=\"candle-trace-boot\">{script}</script>\n"
    ));
    out.push_str("</head>\n<body>\n<noscript>The candle-trace viewer needs JavaScript and WebAssembly.</noscript>\n");
    out.push_str(&format!(
        "<p id=\"boot-message\" class=\"boot-message\">Starting the viewer for {}…</p>\n",
        html_escape(&names.join(", "))
    ));
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

/// Write `bytes` to `to` whole or not at all: a temporary file beside it, then a rename.
pub fn write_atomically(to: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match to.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = to
        .file_name()
        .with_context(|| format!("{} names no file", to.display()))?;
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&temp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&temp, to)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(e).with_context(|| format!("cannot write {}", to.display()));
    }
    Ok(())
}

/// `report`: read and compress the files, write the HTML, say where and how large.
pub fn run(inputs: &[PathBuf], output: &Path, err: &mut dyn Write) -> anyhow::Result<i32> {
    let files = input_files(inputs)?;
    let mut packed = Vec::with_capacity(files.len());
    let mut raw_bytes = 0u64;
    for f in &files {
        raw_bytes += std::fs::metadata(f).map_or(0, |m| m.len());
        packed.push((display_name(f), gzip_file(f)?));
    }
    let html = html(&packed)?;
    write_atomically(output, html.as_bytes())?;
    let _ = writeln!(
        err,
        "candle-trace: wrote {} ({} bytes: {} file(s) of {raw_bytes} bytes and the viewer, compressed); it opens from file:// with no server",
        output.display(),
        html.len(),
        files.len()
    );
    Ok(crate::EXIT_OK)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed expectation is the report

    use super::*;

    #[test]
    fn the_csp_allows_exactly_the_inline_script_and_style() {
        let html = html(&[("a<b>.jsonl".into(), vec![1, 2, 3])]).unwrap();
        let between = |start: &str, end: &str| {
            let from = html.find(start).unwrap() + start.len();
            let to = from + html[from..].find(end).unwrap();
            html[from..to].to_string()
        };
        let script = between("<script id=\"candle-trace-boot\">", "</script>");
        let style = between("<style>", "</style>");
        let csp = between("content=\"default-src", "\"");
        assert!(csp.contains(&format!(
            "script-src {} 'wasm-unsafe-eval';",
            csp_hash(&script)
        )));
        assert!(csp.contains(&format!("style-src {};", csp_hash(&style))));
        assert!(csp.contains("worker-src blob:;"));
        assert!(!csp.contains("unsafe-inline") && !csp.contains("connect-src"));
        // The name is escaped; the bytes are base64.
        assert!(html.contains("data-name=\"a&lt;b&gt;.jsonl\">AQID</script>"));
        assert!(html.contains("<title>candle-trace report: a&lt;b&gt;.jsonl</title>"));
    }

    #[test]
    fn a_file_is_written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("report.html");
        write_atomically(&to, b"one").unwrap();
        write_atomically(&to, b"two").unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), b"two");
        // A destination in a folder that does not exist: an error naming it, nothing left.
        let bad = dir.path().join("missing").join("report.html");
        let e = write_atomically(&bad, b"x").err().unwrap();
        assert!(format!("{e:#}").starts_with(&format!("cannot write {}", bad.display())));
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1);
    }

    #[test]
    fn the_glue_becomes_a_classic_script() {
        let glue = "export class A {\n}\nfunction f() { return new URL('x', import.meta.url); }\nexport { initSync, __wbg_init as default };\n";
        assert_eq!(
            classic_glue(glue).unwrap(),
            "class A {\n}\nfunction f() { return new URL('x', self.location.href); }\n"
        );
        assert!(classic_glue("import x from './snippets/a.js';\n").is_err());
        assert!(classic_glue("export default f;\n").is_err());
        // The glue this binary carries converts.
        let embedded = String::from_utf8(page::read("candle-trace-viewer.js").unwrap()).unwrap();
        let classic = classic_glue(&embedded).unwrap();
        assert!(classic.contains("async function __wbg_init("));
        let worker = String::from_utf8(page::read("candle-trace-worker.js").unwrap()).unwrap();
        let classic = classic_glue(&worker).unwrap();
        assert!(classic.contains("async function __wbg_init("));
        assert!(classic.contains("function serve_port("));
    }

    #[test]
    fn inline_text_that_would_close_its_element_is_refused() {
        assert!(check_inline("x", "let a = '</SCRIPT>';", "</script").is_err());
        assert!(check_inline("x", "a <!-- b", "</script").is_err());
        assert!(check_inline("x", "a < b && c > d", "</script").is_ok());
    }
}
