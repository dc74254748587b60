//! Where the lines go: a file written under a temporary name and renamed when finished, or any
//! `Write` the caller hands over.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::error::CaptureError;

use super::{Counters, Encode, BUFFER_BYTES, FLUSH_INTERVAL};

/// Where lines go, as configured by a builder.
pub(crate) enum Target {
    /// A file; with `atomic`, written as `path.tmp` and renamed by `finish()`.
    Path { path: PathBuf, atomic: bool },
    /// A caller-supplied writer.
    Writer(Box<dyn Write + Send>),
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Path { path, atomic } => f
                .debug_struct("Path")
                .field("path", path)
                .field("atomic", atomic)
                .finish(),
            Target::Writer(_) => f.write_str("Writer(..)"),
        }
    }
}

/// `P.tmp` for `P`: the name an atomic capture is written under until `finish()`.
pub fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".tmp");
    PathBuf::from(name)
}

pub(super) enum Output {
    File {
        file: BufWriter<File>,
        /// The path being written.
        written: PathBuf,
        /// Where to rename it on `finish()`, for atomic captures.
        publish_to: Option<PathBuf>,
    },
    Writer(BufWriter<Box<dyn Write + Send>>),
}

impl Output {
    pub(super) fn open(target: Target) -> Result<Output, CaptureError> {
        match target {
            Target::Path { path, atomic } => {
                let written = if atomic {
                    temporary_path(&path)
                } else {
                    path.clone()
                };
                let file = File::create(&written).map_err(|source| CaptureError::Open {
                    path: written.clone(),
                    source,
                })?;
                Ok(Output::File {
                    file: BufWriter::with_capacity(BUFFER_BYTES, file),
                    written,
                    publish_to: atomic.then_some(path),
                })
            }
            Target::Writer(w) => Ok(Output::Writer(BufWriter::with_capacity(BUFFER_BYTES, w))),
        }
    }

    pub(super) fn name(&self) -> String {
        match self {
            Output::File { written, .. } => written.display().to_string(),
            Output::Writer(_) => String::from("writer"),
        }
    }

    pub(super) fn final_path(&self) -> Option<PathBuf> {
        match self {
            Output::File {
                written,
                publish_to,
                ..
            } => Some(publish_to.clone().unwrap_or_else(|| written.clone())),
            Output::Writer(_) => None,
        }
    }

    pub(super) fn write_all(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            Output::File { file, .. } => file.write_all(line),
            Output::Writer(w) => w.write_all(line),
        }
    }

    pub(super) fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::File { file, .. } => file.flush(),
            Output::Writer(w) => w.flush(),
        }
    }

    /// Make the bytes durable and, for an atomic capture, rename `P.tmp` to `P`.
    pub(super) fn publish(self) -> Result<(), CaptureError> {
        let Output::File {
            file,
            written,
            publish_to: Some(to),
        } = self
        else {
            return Ok(());
        };
        let publish_error = |source| CaptureError::Publish {
            from: written.clone(),
            to: to.clone(),
            source,
        };
        let file = file
            .into_inner()
            .map_err(|e| publish_error(e.into_error()))?;
        file.sync_all().map_err(publish_error)?;
        drop(file);
        std::fs::rename(&written, &to).map_err(publish_error)
    }
}

/// What the writer thread writes with: the outputs, the line being made, the counts, the
/// first I/O error (sticky) and when it last flushed.
pub(super) struct State<'a> {
    pub(super) outputs: Vec<Output>,
    pub(super) error: Option<(String, io::Error)>,
    pub(super) counters: &'a Counters,
    pub(super) line: Vec<u8>,
    pub(super) dirty: bool,
    pub(super) last_flush: Instant,
}

impl State<'_> {
    /// Write `line`, which holds `lines` lines (the last without its `\n`), and count them.
    pub(super) fn write_line(&mut self, lines: u64) {
        self.line.push(b'\n');
        if self.error.is_none() {
            for output in &mut self.outputs {
                if let Err(e) = output.write_all(&self.line) {
                    self.error = Some((output.name(), e));
                    break;
                }
            }
            if self.error.is_none() {
                self.counters.written.fetch_add(lines, Ordering::Relaxed);
                self.counters
                    .bytes
                    .fetch_add(self.line.len() as u64, Ordering::Relaxed);
                self.dirty = true;
            }
        }
        self.line.clear();
    }

    pub(super) fn write_item<T: Encode>(&mut self, item: T, state: &mut T::State) {
        item.encode(&mut self.line, state);
        if !self.line.is_empty() {
            self.write_line(1 + T::extra_lines(state));
        }
    }

    pub(super) fn flush_if_due(&mut self) {
        if self.dirty && self.last_flush.elapsed() >= FLUSH_INTERVAL {
            self.flush();
        }
    }

    pub(super) fn flush(&mut self) {
        self.dirty = false;
        self.last_flush = Instant::now();
        if self.error.is_some() {
            return;
        }
        for output in &mut self.outputs {
            if let Err(e) = output.flush() {
                self.error = Some((output.name(), e));
                return;
            }
        }
    }
}
