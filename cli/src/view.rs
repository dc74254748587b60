//! `candle-trace view FILE… [--port N] [--no-open]`: the viewer served from inside the binary
//! on 127.0.0.1, with the given files open, until Ctrl-C.
//!
//! Before it serves, every file is checked (a missing or unreadable one is named, exit 2) and
//! the port is bound (a port in use is one line naming it, exit 2). Then the URL goes to
//! standard output, flushed, and the default browser opens it unless `--no-open`. The page
//! opens one file with `?url=files/0/NAME` and several (a directory's step files, say) with one
//! `url` parameter each, which it opens together as a picked set.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::serve::{percent_encode, Body, Route, Routes};

/// The files of the inputs: a file as given, a directory's `.jsonl` files in name order (as
/// `steps` and `compare` read a directory). Each must be a readable file; the error names the
/// first that is not.
pub fn input_files(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            files.extend(crate::gate::files_of(input)?);
        } else {
            files.push(input.clone());
        }
    }
    for f in &files {
        let file =
            std::fs::File::open(f).with_context(|| format!("cannot open {}", f.display()))?;
        let meta = file
            .metadata()
            .with_context(|| format!("cannot read {}", f.display()))?;
        if !meta.is_file() {
            anyhow::bail!("{} is not a file", f.display());
        }
    }
    Ok(files)
}

/// A file's name as the page shows it (its last component; `file` when it has none).
pub fn display_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || String::from("file"),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The page's address for these files on `port`: `http://127.0.0.1:PORT/?url=files/0/NAME…`.
pub fn page_url(port: u16, files: &[PathBuf]) -> String {
    let params: Vec<String> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            // The query value is decoded once by the page, then resolved as a path that the
            // server decodes again: the name is encoded twice.
            let path = format!("files/{i}/{}", percent_encode(&display_name(f)));
            format!("url={}", percent_encode(&path).replace("%2F", "/"))
        })
        .collect();
    format!("http://127.0.0.1:{port}/?{}", params.join("&"))
}

/// The server's paths: the page (embedded, or the built page in `page_dir`) and each file at
/// `/files/I/NAME`.
pub fn routes(files: &[PathBuf], page_dir: Option<&Path>) -> anyhow::Result<Routes> {
    let mut routes = Routes::new();
    match page_dir {
        None => {
            if crate::page::file("index.html").is_none() {
                anyhow::bail!(
                    "this candle-trace was built without the viewer page (cli/page/ is empty; \
                     `cargo xtask page --embed` fills it)"
                );
            }
            routes.embedded_page();
        }
        Some(dir) => page_dir_routes(dir, &mut routes)?,
    }
    for (i, f) in files.iter().enumerate() {
        routes.add(
            format!("/files/{i}/{}", display_name(f)),
            Route {
                body: Body::Disk(f.clone()),
                content_type: "application/octet-stream",
            },
        );
    }
    Ok(routes)
}

/// Every file under a built page's folder (listed once, now), at `/PATH`, `index.html` also
/// at `/`.
fn page_dir_routes(dir: &Path, routes: &mut Routes) -> anyhow::Result<()> {
    fn walk(root: &Path, dir: &Path, routes: &mut Routes) -> anyhow::Result<()> {
        for entry in
            std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let path = entry
                .with_context(|| format!("cannot list {}", dir.display()))?
                .path();
            if path.is_dir() {
                walk(root, &path, routes)?;
                continue;
            }
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let rel = rel.join("/");
            let route = Route {
                content_type: crate::page::content_type(&rel),
                body: Body::Disk(path.clone()),
            };
            if rel == "index.html" {
                routes.add("/".into(), route.clone());
            }
            routes.add(format!("/{rel}"), route);
        }
        Ok(())
    }
    if !dir.join("index.html").is_file() {
        anyhow::bail!(
            "{} holds no index.html (build it with `cargo xtask page`)",
            dir.display()
        );
    }
    walk(dir, dir, routes)
}

/// Bind 127.0.0.1:`port` (0: a free port); a port in use is one line naming it.
pub fn bind(port: u16) -> anyhow::Result<TcpListener> {
    TcpListener::bind(("127.0.0.1", port)).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow::anyhow!(
                "port {port} is in use on 127.0.0.1: choose another with --port, or leave --port out for a free one"
            )
        } else {
            anyhow::anyhow!("cannot listen on 127.0.0.1:{port}: {e}")
        }
    })
}

/// Open `url` in the default browser (xdg-open, open, or the Windows URL handler); a failure
/// is a note on `err`, not an error: the URL is printed already.
fn open_browser(url: &str, err: &mut dyn Write) {
    let (program, args): (&str, Vec<&str>) = if cfg!(target_os = "macos") {
        ("open", vec![url])
    } else if cfg!(windows) {
        ("rundll32", vec!["url.dll,FileProtocolHandler", url])
    } else {
        ("xdg-open", vec![url])
    };
    let started = std::process::Command::new(program)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = started {
        let _ = writeln!(
            err,
            "candle-trace: could not open a browser ({program}: {e}); open the address above"
        );
    }
}

/// What `view` was asked.
pub struct Options<'a> {
    /// The files and directories to open.
    pub inputs: &'a [PathBuf],
    /// The port (0: a free one).
    pub port: u16,
    /// Do not start a browser.
    pub no_open: bool,
    /// Serve this built page instead of the embedded one.
    pub page_dir: Option<&'a Path>,
}

/// Check, bind, print the URL, open the browser, serve until the process stops.
pub fn run(opts: Options<'_>, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<i32> {
    let files = input_files(opts.inputs)?;
    let routes = routes(&files, opts.page_dir)?;
    let listener = bind(opts.port)?;
    let port = listener
        .local_addr()
        .context("cannot read the bound address")?
        .port();
    let url = page_url(port, &files);
    writeln!(out, "{url}")?;
    out.flush()?;
    let _ = writeln!(
        err,
        "candle-trace: serving the viewer and {} file(s) on 127.0.0.1:{port} only; Ctrl-C stops",
        files.len()
    );
    if !opts.no_open {
        open_browser(&url, err);
    }
    crate::serve::serve(listener, routes).context("the server stopped")?;
    Ok(crate::EXIT_OK)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed expectation is the report

    use super::*;

    #[test]
    fn the_url_names_each_file_by_position_and_encoded_name() {
        let files = [
            PathBuf::from("/tmp/run/step-2.trace6.jsonl"),
            PathBuf::from("a b&c.jsonl"),
        ];
        assert_eq!(
            page_url(8123, &files),
            "http://127.0.0.1:8123/?url=files/0/step-2.trace6.jsonl&url=files/1/a%2520b%2526c.jsonl"
        );
    }

    #[test]
    fn a_missing_file_is_named_and_a_directory_gives_its_jsonl_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.jsonl");
        let e = input_files(std::slice::from_ref(&missing)).err().unwrap();
        assert!(
            format!("{e:#}").starts_with(&format!("cannot open {}", missing.display())),
            "{e:#}"
        );
        for name in ["step-3.trace6.jsonl", "step-2.trace6.jsonl", "notes.txt"] {
            std::fs::write(dir.path().join(name), "{}\n").unwrap();
        }
        let files = input_files(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(
            files,
            [
                dir.path().join("step-2.trace6.jsonl"),
                dir.path().join("step-3.trace6.jsonl")
            ]
        );
    }

    #[test]
    fn a_port_in_use_is_one_line_naming_it() {
        let taken = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = bind(port).err().unwrap().to_string();
        assert_eq!(
            e,
            format!("port {port} is in use on 127.0.0.1: choose another with --port, or leave --port out for a free one")
        );
    }
}
