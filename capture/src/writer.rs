//! The background writer shared by the trace recorder and the inference profiler.
//!
//! Producers hand items to a bounded queue (`std::sync::mpsc::sync_channel`) with `try_send`, so
//! they never block: when the queue is full the item is dropped and counted. One background
//! thread owns the outputs, turns each item into one whole JSON line and writes it to a
//! `BufWriter`. While events arrive it polls the queue every millisecond, so a producer's
//! `try_send` never has to wake it (a futex call would cost more than the span being
//! recorded); after 20 empty polls it blocks until the next event, so an idle recorder costs
//! nothing. It flushes at least every 100 ms while there is unflushed data, on request, and
//! when the writer is finished or dropped. Because only that thread writes, lines never
//! interleave, and a process killed at any point leaves a file that is valid up to the last flush
//! (at worst followed by one truncated line, which readers report as a warning).
//!
//! The first I/O error is kept (sticky); every later line is skipped, and `finish()` returns
//! the error. Producers never see it.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::CaptureError;

/// Default number of events the queue holds before new ones are dropped.
pub const DEFAULT_QUEUE_CAPACITY: usize = 65_536;

/// Longest time written lines stay in the writer's buffer.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

const BUFFER_BYTES: usize = 64 * 1024;

/// How long the writer thread sleeps between polls of the queue while events flow.
const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// Empty polls in a row after which the writer thread blocks until the next event.
const IDLE_POLLS: u32 = 20;

/// What `finish()` reports about a completed capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureReport {
    /// Lines written, the meta line (trace) and any `capture_stats` line included.
    pub events_written: u64,
    /// Events dropped because the queue was full.
    pub events_dropped: u64,
    /// Bytes handed to the output.
    pub bytes_written: u64,
    /// The published file, when writing to a path.
    pub path: Option<PathBuf>,
    /// Things the recorder refused or noticed (a second measured region, a `meta` passed to
    /// `emit` ...), one sentence each.
    pub notes: Vec<String>,
}

/// Anything the writer thread can turn into one JSON line.
pub(crate) trait Encode: Send + 'static {
    /// Append the line, without its `\n`, to `out`.
    fn encode(&self, out: &mut Vec<u8>);
}

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

enum Output {
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
    fn open(target: Target) -> Result<Output, CaptureError> {
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

    fn name(&self) -> String {
        match self {
            Output::File { written, .. } => written.display().to_string(),
            Output::Writer(_) => String::from("writer"),
        }
    }

    fn final_path(&self) -> Option<PathBuf> {
        match self {
            Output::File {
                written,
                publish_to,
                ..
            } => Some(publish_to.clone().unwrap_or_else(|| written.clone())),
            Output::Writer(_) => None,
        }
    }

    fn write_all(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            Output::File { file, .. } => file.write_all(line),
            Output::Writer(w) => w.write_all(line),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::File { file, .. } => file.flush(),
            Output::Writer(w) => w.flush(),
        }
    }

    /// Make the bytes durable and, for an atomic capture, rename `P.tmp` to `P`.
    fn publish(self) -> Result<(), CaptureError> {
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

enum Msg<T> {
    Item(T),
    Flush(mpsc::Sender<()>),
    Shutdown,
}

/// Counters shared by producers and the writer thread.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Items dropped because the queue was full.
    pub(crate) dropped: AtomicU64,
    /// Lines written.
    pub(crate) written: AtomicU64,
    /// Bytes written.
    pub(crate) bytes: AtomicU64,
}

/// The lines written around the items.
pub(crate) struct Framing {
    /// Written first (the trace's meta line), without `\n`.
    pub(crate) header: Option<Vec<u8>>,
    /// Called once at the end with the number of dropped items; returns a last line, if any.
    pub(crate) trailer: fn(dropped: u64, written: u64) -> Option<Vec<u8>>,
}

struct ThreadEnd {
    outputs: Vec<Output>,
    error: Option<(String, io::Error)>,
}

/// The producer side of a background writer.
pub(crate) struct Writer<T: Encode> {
    tx: SyncSender<Msg<T>>,
    counters: Arc<Counters>,
    thread: Mutex<Option<JoinHandle<ThreadEnd>>>,
}

/// What the writer reports when it is finished without error.
pub(crate) struct WriterReport {
    pub(crate) events_written: u64,
    pub(crate) events_dropped: u64,
    pub(crate) bytes_written: u64,
    pub(crate) paths: Vec<PathBuf>,
}

impl<T: Encode> Writer<T> {
    /// Open every target and start the writer thread.
    pub(crate) fn spawn(
        targets: Vec<Target>,
        capacity: usize,
        framing: Framing,
        thread_name: &str,
    ) -> Result<Self, CaptureError> {
        let outputs = targets
            .into_iter()
            .map(Output::open)
            .collect::<Result<Vec<_>, _>>()?;
        let (tx, rx) = mpsc::sync_channel(capacity.max(1));
        let counters = Arc::new(Counters::default());
        let thread_counters = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name(thread_name.to_string())
            .spawn(move || run(rx, outputs, framing, &thread_counters))
            .map_err(|source| CaptureError::Write {
                target: String::from("writer thread"),
                bytes_written: 0,
                source,
            })?;
        Ok(Writer {
            tx,
            counters,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queue one item; never blocks. A full queue drops it and counts the drop; after the
    /// writer has finished, items are discarded.
    #[inline]
    pub(crate) fn send(&self, item: T) {
        match self.tx.try_send(Msg::Item(item)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Items dropped so far because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.counters.dropped.load(Ordering::Relaxed)
    }

    /// Block until everything queued before this call is handed to the output (and flushed
    /// out of the buffer), or `timeout` passes. True when the flush was confirmed.
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        let (ack_tx, ack_rx) = mpsc::channel();
        let deadline = Instant::now() + timeout;
        // A blocking send only waits for the writer thread to make room, and fails at once if
        // the thread is gone.
        if self.tx.send(Msg::Flush(ack_tx)).is_err() {
            return false;
        }
        ack_rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_ok()
    }

    /// Stop the thread after it has written everything queued, the trailer and a final flush.
    fn stop(&self) -> Result<Option<ThreadEnd>, CaptureError> {
        let handle = match self.thread.lock() {
            Ok(mut slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        let Some(handle) = handle else {
            return Ok(None);
        };
        // Fails only when the thread is already gone (it panicked); join reports that.
        let _ = self.tx.send(Msg::Shutdown);
        handle
            .join()
            .map(Some)
            .map_err(|_| CaptureError::WriterPanicked)
    }

    /// Finish: drain the queue, write the trailer, flush, publish atomic files, report.
    pub(crate) fn finish(&self) -> Result<WriterReport, CaptureError> {
        let Some(end) = self.stop()? else {
            return Err(CaptureError::AlreadyFinished);
        };
        let bytes_written = self.counters.bytes.load(Ordering::Relaxed);
        if let Some((target, source)) = end.error {
            return Err(CaptureError::Write {
                target,
                bytes_written,
                source,
            });
        }
        let mut paths = Vec::new();
        for output in end.outputs {
            paths.extend(output.final_path());
            output.publish()?;
        }
        Ok(WriterReport {
            events_written: self.counters.written.load(Ordering::Relaxed),
            events_dropped: self.counters.dropped.load(Ordering::Relaxed),
            bytes_written,
            paths,
        })
    }
}

impl<T: Encode> Drop for Writer<T> {
    /// Without `finish()`, the thread still drains, flushes and stops; an atomic capture is not
    /// published (its `P.tmp` stays), and errors are lost.
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

struct State<'a> {
    outputs: Vec<Output>,
    error: Option<(String, io::Error)>,
    counters: &'a Counters,
    line: Vec<u8>,
    dirty: bool,
    last_flush: Instant,
}

impl State<'_> {
    fn write_line(&mut self) {
        self.line.push(b'\n');
        if self.error.is_none() {
            for output in &mut self.outputs {
                if let Err(e) = output.write_all(&self.line) {
                    self.error = Some((output.name(), e));
                    break;
                }
            }
            if self.error.is_none() {
                self.counters.written.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .bytes
                    .fetch_add(self.line.len() as u64, Ordering::Relaxed);
                self.dirty = true;
            }
        }
        self.line.clear();
    }

    /// Write or act on one message; false on `Shutdown`.
    fn handle<T: Encode>(&mut self, msg: Msg<T>) -> bool {
        match msg {
            Msg::Item(item) => {
                item.encode(&mut self.line);
                self.write_line();
            }
            Msg::Flush(ack) => {
                self.flush();
                let _ = ack.send(());
            }
            Msg::Shutdown => return false,
        }
        true
    }

    fn flush_if_due(&mut self) {
        if self.dirty && self.last_flush.elapsed() >= FLUSH_INTERVAL {
            self.flush();
        }
    }

    fn flush(&mut self) {
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

fn run<T: Encode>(
    rx: Receiver<Msg<T>>,
    outputs: Vec<Output>,
    framing: Framing,
    counters: &Counters,
) -> ThreadEnd {
    let mut s = State {
        outputs,
        error: None,
        counters,
        line: Vec::with_capacity(512),
        dirty: false,
        last_flush: Instant::now(),
    };
    if let Some(header) = framing.header {
        s.line = header;
        s.write_line();
        // The header is on disk before any event: a reader can identify the file at once.
        s.flush();
    }
    // Polling while events flow: a producer's `try_send` then never has a sleeping receiver
    // to wake (a futex call costing more than the span itself); after `IDLE_POLLS` empty polls
    // the thread blocks in `recv` until the next event, so an idle recorder costs nothing.
    let mut idle_polls = 0u32;
    'run: loop {
        let mut received = 0u32;
        loop {
            match rx.try_recv() {
                Ok(msg) => {
                    if !s.handle(msg) {
                        break 'run;
                    }
                    received += 1;
                    if received % 1024 == 0 {
                        s.flush_if_due();
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => break 'run,
            }
        }
        s.flush_if_due();
        if received > 0 {
            idle_polls = 0;
        } else {
            idle_polls += 1;
        }
        if idle_polls < IDLE_POLLS {
            std::thread::sleep(POLL_INTERVAL);
            continue;
        }
        let msg = if s.dirty {
            match rx.recv_timeout(FLUSH_INTERVAL.saturating_sub(s.last_flush.elapsed())) {
                Ok(msg) => msg,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(msg) => msg,
                Err(_) => break,
            }
        };
        idle_polls = 0;
        if !s.handle(msg) {
            break;
        }
    }
    let dropped = counters.dropped.load(Ordering::Relaxed);
    let written = counters.written.load(Ordering::Relaxed);
    if let Some(trailer) = (framing.trailer)(dropped, written) {
        s.line = trailer;
        s.write_line();
    }
    s.flush();
    ThreadEnd {
        outputs: s.outputs,
        error: s.error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Text(&'static str);
    impl Encode for Text {
        fn encode(&self, out: &mut Vec<u8>) {
            out.extend_from_slice(self.0.as_bytes());
        }
    }

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn no_trailer(_: u64, _: u64) -> Option<Vec<u8>> {
        None
    }

    #[test]
    fn header_items_and_trailer_are_whole_lines_in_order() {
        let out = Shared::default();
        let w = Writer::spawn(
            vec![Target::Writer(Box::new(out.clone()))],
            16,
            Framing {
                header: Some(b"head".to_vec()),
                trailer: |dropped, written| Some(format!("tail {dropped} {written}").into_bytes()),
            },
            "test-writer",
        )
        .unwrap();
        w.send(Text("a"));
        w.send(Text("b"));
        let report = w.finish().unwrap();
        assert_eq!(
            String::from_utf8(out.0.lock().unwrap().clone()).unwrap(),
            "head\na\nb\ntail 0 3\n"
        );
        assert_eq!(report.events_written, 4);
        assert_eq!(report.bytes_written, 18);
        assert!(matches!(w.finish(), Err(CaptureError::AlreadyFinished)));
        // After finish, sends are discarded quietly.
        w.send(Text("c"));
        assert_eq!(w.dropped(), 0);
    }

    #[test]
    fn flush_waits_for_the_queue() {
        let out = Shared::default();
        let w = Writer::spawn(
            vec![Target::Writer(Box::new(out.clone()))],
            16,
            Framing {
                header: None,
                trailer: no_trailer,
            },
            "test-writer",
        )
        .unwrap();
        w.send(Text("x"));
        assert!(w.flush(Duration::from_secs(5)));
        assert_eq!(out.0.lock().unwrap().as_slice(), b"x\n");
    }

    #[test]
    fn temporary_path_appends_tmp() {
        assert_eq!(
            temporary_path(Path::new("/a/trace.jsonl")),
            PathBuf::from("/a/trace.jsonl.tmp")
        );
    }
}
