//! Where the lines go: a file written under a temporary name and renamed when finished, or any
//! `Write` the caller hands over.

use std::fs::File;
use std::io::{self, Write};
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

/// An output; the lines reach it through [`State`]'s one buffer, so it is not buffered itself.
pub(super) enum Output {
    File {
        file: File,
        /// The path being written.
        written: PathBuf,
        /// Where to rename it on `finish()`, for atomic captures.
        publish_to: Option<PathBuf>,
    },
    Writer(Box<dyn Write + Send>),
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
                    file,
                    written,
                    publish_to: atomic.then_some(path),
                })
            }
            Target::Writer(w) => Ok(Output::Writer(w)),
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

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Output::File { file, .. } => file.write_all(bytes),
            Output::Writer(w) => w.write_all(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
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
        file.sync_all().map_err(publish_error)?;
        drop(file);
        std::fs::rename(&written, &to).map_err(publish_error)
    }
}

/// What the writer thread writes with: the outputs, the lines not yet handed to them, the
/// counts, the first I/O error (sticky) and when it last flushed.
///
/// Items are encoded straight into `buffer`, line after line, and the buffer goes to every
/// output once it holds [`BUFFER_BYTES`] and at each flush: a line is copied once, not into a
/// line and then into each output's own buffer.
pub(super) struct State<'a> {
    pub(super) outputs: Vec<Output>,
    pub(super) error: Option<(String, io::Error)>,
    pub(super) counters: &'a Counters,
    pub(super) buffer: Vec<u8>,
    pub(super) dirty: bool,
    pub(super) last_flush: Instant,
}

impl<'a> State<'a> {
    pub(super) fn new(outputs: Vec<Output>, counters: &'a Counters) -> Self {
        State {
            outputs,
            error: None,
            counters,
            buffer: Vec::with_capacity(BUFFER_BYTES + BUFFER_BYTES / 4),
            dirty: false,
            last_flush: Instant::now(),
        }
    }

    /// Write `text`, one whole line without its `\n` (a header, closing or trailer line).
    pub(super) fn write_text(&mut self, text: &[u8]) {
        let start = self.buffer.len();
        self.buffer.extend_from_slice(text);
        self.lines_added(start, 1);
    }

    /// Encode `item` into the buffer; what it wrote (lines with `\n` between them) is counted.
    pub(super) fn write_item<T: Encode>(&mut self, item: &T, state: &mut T::State) {
        let start = self.buffer.len();
        item.encode(&mut self.buffer, state);
        if self.buffer.len() > start {
            self.lines_added(start, 1 + T::extra_lines(state));
        }
    }

    /// The bytes from `start` on are `lines` lines (the last without its `\n`): end them and
    /// count them, or drop them after an I/O error.
    fn lines_added(&mut self, start: usize, lines: u64) {
        if self.error.is_some() {
            self.buffer.truncate(start);
            return;
        }
        self.buffer.push(b'\n');
        self.counters.written.fetch_add(lines, Ordering::Relaxed);
        self.counters
            .bytes
            .fetch_add((self.buffer.len() - start) as u64, Ordering::Relaxed);
        self.dirty = true;
        if self.buffer.len() >= BUFFER_BYTES {
            self.spill();
        }
    }

    /// Hand the buffer to every output.
    fn spill(&mut self) {
        if self.error.is_none() && !self.buffer.is_empty() {
            for output in &mut self.outputs {
                if let Err(e) = output.write_all(&self.buffer) {
                    self.error = Some((output.name(), e));
                    break;
                }
            }
        }
        self.buffer.clear();
    }

    pub(super) fn flush_if_due(&mut self) {
        if self.dirty && self.last_flush.elapsed() >= FLUSH_INTERVAL {
            self.flush();
        }
    }

    pub(super) fn flush(&mut self) {
        self.spill();
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
