//! [`CaptureError`]: what `finish()` and the profiler's constructor can report.

use std::io;
use std::path::PathBuf;

/// Why a capture could not be completed.
///
/// Recording itself never fails: the first I/O error is kept and returned here by `finish()`,
/// and everything emitted after it is skipped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// Writing the output failed; the first error is reported, later writes were skipped.
    #[error("writing {target} failed after {bytes_written} bytes: {source}")]
    Write {
        /// The file path, or `writer` for a caller-supplied writer.
        target: String,
        /// Bytes handed to the output before the error.
        bytes_written: u64,
        /// The first I/O error.
        #[source]
        source: io::Error,
    },
    /// Opening an output file failed.
    #[error("cannot create {}: {source}", path.display())]
    Open {
        /// The file that could not be created.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Renaming the finished `P.tmp` to `P` failed (atomic publication).
    #[error("cannot publish {} as {}: {source}", from.display(), to.display())]
    Publish {
        /// The temporary file, left in place.
        from: PathBuf,
        /// The path it should have been published as.
        to: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The profiling config breaks a rule of SCHEMA.md §2 (one message per broken rule).
    #[error("invalid profiling config: {}", .0.join("; "))]
    InvalidConfig(Vec<String>),
    /// The background writer thread panicked; what it wrote before is on disk.
    #[error("the capture writer thread panicked")]
    WriterPanicked,
    /// `install()` found another global `tracing` subscriber already set; add
    /// [`TraceLayer`](crate::TraceLayer) to that subscriber instead.
    #[error(
        "another global tracing subscriber is already set: add candle_trace_capture::TraceLayer \
         to it instead of calling install()"
    )]
    SubscriberTaken,
    /// Building the recorder or the profiler's output failed.
    #[error("cannot start the capture: {0}")]
    Build(#[source] io::Error),
    /// `finish()` was called more than once.
    #[error("this capture was already finished")]
    AlreadyFinished,
    /// The OTLP exporter could not be built (feature `otlp`), e.g. a malformed endpoint.
    #[error("cannot start the OTLP exporter: {0}")]
    Otlp(String),
}
