//! A minimal static file server for the demo: `web/dist` at `/`, the demo traces at `/demo/`.
//! GET and HEAD only, bound to 127.0.0.1, no directory listings, no path escapes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("wasm") => "application/wasm",
        Some("css") => "text/css",
        Some("json") => "application/json",
        Some("jsonl") => "application/x-ndjson",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

/// Map a request path to a file under `dist` (or `demo` for `/demo/...`), refusing `..`.
fn resolve(dist: &Path, demo: &Path, url_path: &str) -> Option<PathBuf> {
    let path = url_path.split(['?', '#']).next().unwrap_or("/");
    let (base, rest) = match path.strip_prefix("/demo/") {
        Some(rest) => (demo, rest),
        None => (dist, path.trim_start_matches('/')),
    };
    let rest = if rest.is_empty() { "index.html" } else { rest };
    let rel = Path::new(rest);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let file = base.join(rel);
    file.is_file().then_some(file)
}

fn answer(mut stream: TcpStream, dist: &Path, demo: &Path) -> std::io::Result<()> {
    let mut request = String::new();
    BufReader::new(&stream).read_line(&mut request)?;
    let mut parts = request.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
    let found = matches!(method, "GET" | "HEAD")
        .then(|| resolve(dist, demo, target))
        .flatten();
    match found.and_then(|f| std::fs::read(&f).ok().map(|body| (f, body))) {
        Some((file, body)) => {
            write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n",
                content_type(&file),
                body.len()
            )?;
            if method == "GET" {
                stream.write_all(&body)?;
            }
        }
        None => write!(
            stream,
            "HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\nconnection: close\r\n\r\nnot found"
        )?,
    }
    stream.flush()
}

/// Serve until the process is stopped. `on_ready` gets the bound address.
pub fn serve(dist: &Path, demo: &Path, port: u16, on_ready: impl FnOnce(&str)) -> Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
    let addr = listener.local_addr()?.to_string();
    on_ready(&addr);
    for stream in listener.incoming().flatten() {
        let (dist, demo) = (dist.to_path_buf(), demo.to_path_buf());
        std::thread::spawn(move || {
            let _ = answer(stream, &dist, &demo);
        });
    }
    Ok(())
}

/// The status of `GET path` from a server on 127.0.0.1:`port`.
pub fn get_status(port: u16, path: &str) -> Result<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).context("cannot reach the demo")?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .context("socket")?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").context("cannot send")?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).context("no answer")?;
    std::str::from_utf8(&head[9..12])
        .ok()
        .and_then(|s| s.parse().ok())
        .context("not an HTTP answer")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_cannot_escape() {
        let dir = std::env::temp_dir().join(format!("xtask-serve-{}", std::process::id()));
        let (dist, demo) = (dir.join("dist"), dir.join("demo"));
        std::fs::create_dir_all(&dist).unwrap();
        std::fs::create_dir_all(&demo).unwrap();
        std::fs::write(dist.join("index.html"), "x").unwrap();
        std::fs::write(demo.join("t.jsonl"), "y").unwrap();
        assert_eq!(resolve(&dist, &demo, "/"), Some(dist.join("index.html")));
        assert_eq!(
            resolve(&dist, &demo, "/?url=demo/t.jsonl"),
            Some(dist.join("index.html"))
        );
        assert_eq!(
            resolve(&dist, &demo, "/demo/t.jsonl"),
            Some(demo.join("t.jsonl"))
        );
        assert_eq!(resolve(&dist, &demo, "/../Cargo.toml"), None);
        assert_eq!(resolve(&dist, &demo, "/demo/../dist/index.html"), None);
        assert_eq!(resolve(&dist, &demo, "/missing.js"), None);
        std::fs::remove_dir_all(&dir).ok();
    }
}
