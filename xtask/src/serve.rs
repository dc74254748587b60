//! The status of a GET from a server on 127.0.0.1 (the demo's `candle-trace view`, `trunk
//! serve`): how `fresh` and CI's trunk check see that a page is served.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{Context, Result};

/// The status of `GET path` from a server on 127.0.0.1:`port` (with `Host: 127.0.0.1:PORT`,
/// the only host `candle-trace view` answers besides `localhost:PORT`).
pub fn get_status(port: u16, path: &str) -> Result<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).context("cannot reach the server")?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .context("socket")?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .context("cannot send")?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).context("no answer")?;
    std::str::from_utf8(&head[9..12])
        .ok()
        .and_then(|s| s.parse().ok())
        .context("not an HTTP answer")
}
