//! The HTTP server behind `view`: std's `TcpListener` on 127.0.0.1, a thread per connection,
//! one request per connection (HTTP/1.1 with `Connection: close`), `GET` and `HEAD` of a fixed
//! table of paths made at start ([`Routes`]): the page's files and the given trace files.
//!
//! What it refuses: a `Host` other than `127.0.0.1:PORT` or `localhost:PORT` (403: a page on
//! another site that points a DNS name at 127.0.0.1 gets nothing), any path not in the table
//! (404: no listing, nothing else from the disk, no `..` — paths are looked up whole after
//! percent-decoding, never joined to a folder), other methods (405), and a request head over
//! [`MAX_HEAD_BYTES`] or not read within [`READ_TIMEOUT`] (400 or closed).

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::page::{self, PageFile};

/// The most bytes of a request's line and headers.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// How long a connection may take to send its request.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a path's bytes come from.
#[derive(Debug, Clone)]
pub enum Body {
    /// A file of the embedded page (gzip-compressed).
    Embedded(&'static PageFile),
    /// A file on disk, read when asked for (a given trace, or a page folder's file).
    Disk(PathBuf),
}

/// What one path answers.
#[derive(Debug, Clone)]
pub struct Route {
    /// Where the bytes come from.
    pub body: Body,
    /// Its media type.
    pub content_type: &'static str,
}

/// The paths the server answers, each a whole, percent-decoded path (`/`, `/loader.js`,
/// `/files/0/train.trace6.jsonl`).
#[derive(Debug, Default, Clone)]
pub struct Routes(HashMap<String, Route>);

impl Routes {
    /// No paths.
    pub fn new() -> Self {
        Routes::default()
    }

    /// Answer `path` with `route`.
    pub fn add(&mut self, path: String, route: Route) {
        self.0.insert(path, route);
    }

    /// The embedded page's files at `/NAME`, and `index.html` also at `/`.
    pub fn embedded_page(&mut self) {
        for f in page::FILES {
            let route = Route {
                body: Body::Embedded(f),
                content_type: page::content_type(f.path),
            };
            if f.path == "index.html" {
                self.add("/".into(), route.clone());
            }
            self.add(format!("/{}", f.path), route);
        }
    }

    /// What `path` answers.
    pub fn get(&self, path: &str) -> Option<&Route> {
        self.0.get(path)
    }
}

/// The request's path without its query or fragment, percent-decoded; `None` when it is not
/// an origin-form path (`/…`) or decodes to something that is not UTF-8.
pub fn request_path(target: &str) -> Option<String> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    if !path.starts_with('/') {
        return None;
    }
    percent_decode(path)
}

/// `%XX` escapes decoded; `None` for a broken escape or bytes that are not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `s` with every byte but `A–Z a–z 0–9 - . _ ~` written as `%XX` (a path segment or a query
/// value).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether a `Host` header names this server: `127.0.0.1:PORT` or `localhost:PORT`.
pub fn host_allowed(host: &str, port: u16) -> bool {
    let Some((name, p)) = host.trim().rsplit_once(':') else {
        return false;
    };
    p == port.to_string() && (name == "127.0.0.1" || name.eq_ignore_ascii_case("localhost"))
}

/// A parsed request head.
#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    /// `GET`, `HEAD` …
    pub method: String,
    /// The request target as sent.
    pub target: String,
    /// The `Host` header, if any.
    pub host: Option<String>,
    /// Whether `Accept-Encoding` lists gzip.
    pub gzip: bool,
}

/// Read a request head (up to the blank line); `Ok(None)` when it is malformed or too long.
pub fn read_head(stream: &mut impl BufRead) -> io::Result<Option<Head>> {
    let mut lines = Vec::new();
    let mut read = 0usize;
    loop {
        let mut line = Vec::new();
        let n = stream
            .take((MAX_HEAD_BYTES - read) as u64 + 1)
            .read_until(b'\n', &mut line)?;
        read += n;
        if n == 0 || read > MAX_HEAD_BYTES || !line.ends_with(b"\n") {
            return Ok(None);
        }
        let Ok(text) = String::from_utf8(line) else {
            return Ok(None);
        };
        let text = text.trim_end_matches(['\r', '\n']).to_string();
        if text.is_empty() {
            break;
        }
        lines.push(text);
    }
    let Some(first) = lines.first() else {
        return Ok(None);
    };
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Ok(None);
    };
    if !version.starts_with("HTTP/1.") {
        return Ok(None);
    }
    let mut head = Head {
        method: method.to_string(),
        target: target.to_string(),
        host: None,
        gzip: false,
    };
    for line in &lines[1..] {
        let Some((name, value)) = line.split_once(':') else {
            return Ok(None);
        };
        if name.eq_ignore_ascii_case("host") {
            if head.host.is_some() {
                // Two Host headers: which one a proxy would read is anyone's guess.
                return Ok(None);
            }
            head.host = Some(value.trim().to_string());
        } else if name.eq_ignore_ascii_case("accept-encoding") {
            head.gzip |= value.split(',').any(|e| {
                e.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .eq_ignore_ascii_case("gzip")
            });
        }
    }
    Ok(Some(head))
}

/// Headers every answer carries.
const COMMON: &str = "cache-control: no-cache\r\nx-content-type-options: nosniff\r\n\
                      referrer-policy: no-referrer\r\ncross-origin-resource-policy: same-origin\r\n\
                      connection: close\r\n";

fn plain(stream: &mut impl Write, status: &str, text: &str) -> io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n{COMMON}\r\n{text}",
        text.len()
    )?;
    stream.flush()
}

/// Answer one request on `stream` from `routes`.
pub fn answer(stream: &mut (impl Read + Write), routes: &Routes, port: u16) -> io::Result<()> {
    let head = {
        let mut reader = BufReader::new(&mut *stream);
        read_head(&mut reader)?
    };
    let Some(head) = head else {
        return plain(stream, "400 Bad Request", "bad request\n");
    };
    if !head.host.as_deref().is_some_and(|h| host_allowed(h, port)) {
        return plain(
            stream,
            "403 Forbidden",
            &format!("only http://127.0.0.1:{port}/ and http://localhost:{port}/ are served\n"),
        );
    }
    let is_head = match head.method.as_str() {
        "GET" => false,
        "HEAD" => true,
        _ => return plain(stream, "405 Method Not Allowed", "GET or HEAD only\n"),
    };
    let Some(route) = request_path(&head.target).and_then(|p| routes.get(&p)) else {
        return plain(stream, "404 Not Found", "not found\n");
    };
    match &route.body {
        Body::Embedded(f) => {
            let (body, encoding) = if head.gzip {
                (
                    std::borrow::Cow::Borrowed(f.gzip),
                    "content-encoding: gzip\r\n",
                )
            } else {
                (std::borrow::Cow::Owned(page::gunzip(f.gzip)?), "")
            };
            write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ncontent-length: {}\r\n{encoding}vary: accept-encoding\r\n{COMMON}\r\n",
                route.content_type,
                body.len()
            )?;
            if !is_head {
                stream.write_all(&body)?;
            }
        }
        Body::Disk(path) => {
            let Ok(mut file) = std::fs::File::open(path) else {
                return plain(stream, "404 Not Found", "not found\n");
            };
            let len = file.metadata()?.len();
            write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ncontent-length: {len}\r\n{COMMON}\r\n",
                route.content_type
            )?;
            if !is_head {
                // At most the length announced, should the file have grown since.
                io::copy(&mut (&mut file).take(len), stream)?;
            }
        }
    }
    stream.flush()
}

/// Serve `routes` on `listener` (bound to 127.0.0.1) until the process stops.
pub fn serve(listener: TcpListener, routes: Routes) -> io::Result<()> {
    let port = listener.local_addr()?.port();
    let routes = Arc::new(routes);
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let routes = Arc::clone(&routes);
        std::thread::spawn(move || {
            let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
            let _ = answer(&mut stream, &routes, port);
            // Whatever the client sent beyond the head is not read: close both ways.
            let _ = stream.shutdown(std::net::Shutdown::Both);
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed expectation is the report

    use super::*;

    /// [`answer`]'s bytes for one request.
    fn exchange(routes: &Routes, port: u16, request: &str) -> String {
        struct Duplex {
            input: io::Cursor<Vec<u8>>,
            output: Vec<u8>,
        }
        impl Read for Duplex {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                self.input.read(buf)
            }
        }
        impl Write for Duplex {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.output.write(buf)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut d = Duplex {
            input: io::Cursor::new(request.as_bytes().to_vec()),
            output: Vec::new(),
        };
        let _ = answer(&mut d, routes, port);
        String::from_utf8_lossy(&d.output).into_owned()
    }

    fn routes(dir: &std::path::Path) -> Routes {
        let trace = dir.join("t.jsonl");
        std::fs::write(&trace, "{}\n").unwrap();
        std::fs::write(dir.join("secret.txt"), "secret").unwrap();
        let mut r = Routes::new();
        r.embedded_page();
        r.add(
            "/files/0/t.jsonl".into(),
            Route {
                body: Body::Disk(trace),
                content_type: "application/x-ndjson",
            },
        );
        r
    }

    fn status(answer: &str) -> &str {
        answer.lines().next().unwrap_or("")
    }

    #[test]
    fn serves_the_page_and_the_given_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let r = routes(dir.path());
        let get = |path: &str| {
            exchange(
                &r,
                8123,
                &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:8123\r\nAccept-Encoding: gzip, br\r\n\r\n"),
            )
        };
        let page = get("/?url=files/0/t.jsonl");
        assert_eq!(status(&page), "HTTP/1.1 200 OK");
        assert!(page.contains("content-encoding: gzip\r\n"));
        assert!(page.contains("content-type: text/html; charset=utf-8\r\n"));
        let trace = get("/files/0/t.jsonl");
        assert_eq!(status(&trace), "HTTP/1.1 200 OK");
        assert!(trace.ends_with("\r\n\r\n{}\n"), "{trace}");
        assert!(trace.contains("content-length: 3\r\n"));
        for path in [
            "/secret.txt",
            "/files/0/../secret.txt",
            "/files/0/%2e%2e/secret.txt",
            "/files/",
            "/files/1/t.jsonl",
            "/../Cargo.toml",
            "//etc/passwd",
            "/assets/",
            "/%ZZ",
            "http://127.0.0.1:8123/",
        ] {
            assert_eq!(status(&get(path)), "HTTP/1.1 404 Not Found", "{path}");
        }
    }

    #[test]
    fn only_its_own_host_and_port_are_answered() {
        let dir = tempfile::tempdir().unwrap();
        let r = routes(dir.path());
        let with_host = |host: &str| {
            exchange(
                &r,
                8123,
                &format!("GET / HTTP/1.1\r\n{host}Accept-Encoding: gzip\r\n\r\n"),
            )
        };
        for ok in [
            "Host: 127.0.0.1:8123\r\n",
            "Host: localhost:8123\r\n",
            "host: LOCALHOST:8123\r\n",
        ] {
            assert_eq!(status(&with_host(ok)), "HTTP/1.1 200 OK", "{ok}");
        }
        for bad in [
            "",
            "Host: evil.example:8123\r\n",
            "Host: 127.0.0.1\r\n",
            "Host: 127.0.0.1:8124\r\n",
            "Host: localhost.evil.example:8123\r\n",
            "Host: 127.0.0.1:8123\r\nHost: evil.example\r\n",
        ] {
            let a = with_host(bad);
            assert!(
                status(&a) == "HTTP/1.1 403 Forbidden" || status(&a) == "HTTP/1.1 400 Bad Request",
                "{bad}: {a}"
            );
        }
    }

    #[test]
    fn head_post_and_clients_without_gzip() {
        let dir = tempfile::tempdir().unwrap();
        let r = routes(dir.path());
        let head = exchange(
            &r,
            1,
            "HEAD /loader.js HTTP/1.1\r\nHost: localhost:1\r\n\r\n",
        );
        assert_eq!(status(&head), "HTTP/1.1 200 OK");
        assert!(head.ends_with("\r\n\r\n"));
        let post = exchange(&r, 1, "POST / HTTP/1.1\r\nHost: localhost:1\r\n\r\n");
        assert_eq!(status(&post), "HTTP/1.1 405 Method Not Allowed");
        // Without Accept-Encoding: gzip the page is sent uncompressed.
        let plain = exchange(
            &r,
            1,
            "GET /loader.js HTTP/1.1\r\nHost: localhost:1\r\n\r\n",
        );
        assert!(!plain.contains("content-encoding"));
        assert!(plain.contains("import init from"), "{plain}");
        let long = format!(
            "GET /{} HTTP/1.1\r\nHost: localhost:1\r\n\r\n",
            "a".repeat(MAX_HEAD_BYTES)
        );
        assert_eq!(status(&exchange(&r, 1, &long)), "HTTP/1.1 400 Bad Request");
        assert_eq!(
            status(&exchange(&r, 1, "GET /\r\n\r\n")),
            "HTTP/1.1 400 Bad Request"
        );
    }

    #[test]
    fn paths_round_trip_through_percent_encoding() {
        for name in [
            "train.trace6.jsonl",
            "a b&c=d#e%f.jsonl",
            "étape-2.jsonl",
            "x/y",
        ] {
            assert_eq!(percent_decode(&percent_encode(name)).as_deref(), Some(name));
        }
        assert_eq!(percent_encode("a b/ü"), "a%20b%2F%C3%BC");
        assert_eq!(percent_decode("%"), None);
        assert_eq!(percent_decode("%C3"), None);
        assert_eq!(
            request_path("/files/0/a%20b?x=1#y").as_deref(),
            Some("/files/0/a b")
        );
        assert_eq!(request_path("*"), None);
    }
}
