//! The background writer shared by the trace recorder and the inference profiler.
//!
//! Each producing thread pushes items into a single-producer ring of its own; it never waits
//! for I/O or for another thread: when its ring already holds the queue capacity the item is
//! dropped and counted. One background thread owns the outputs. While events arrive it drains
//! every ring each millisecond, turns each item into one whole JSON line and writes it to a
//! `BufWriter`. After 20 empty polls it marks itself sleeping and blocks until a push wakes it,
//! so an idle recorder costs nothing. It flushes at least every 100 ms while there is unflushed
//! data, on request, and when the writer is finished or dropped.
//!
//! While the owner measures a region (a recorder's captured step) the writer is *held*
//! ([`Writer::hold`]): each millisecond the thread only looks at the rings and lets each new
//! item take the readings that belong to its time ([`Encode::sample`]: a host checkpoint's
//! `/proc` numbers), and it encodes them after the region, when a ring reaches a sixteenth of
//! its capacity, or when the oldest has waited 50 ms (then flushed at once), so the encoding
//! does not take CPU time from the step being measured and a killed process still keeps what
//! it recorded up to the last flush. Because only that thread
//! writes, lines never interleave, and a process killed at any point leaves a file that is
//! valid up to the last flush (at worst followed by one truncated line, which readers report
//! as a warning).
//!
//! Lines of one thread keep their order; lines of different threads are grouped by ring.
//! Trace readers assemble spans, ends and references by id at the end of the file, so only the
//! meta line's place (first, written before any item) matters.
//!
//! The first I/O error is kept (sticky); every later line is skipped, and `finish()` returns
//! the error. Producers never see it.

use std::cell::RefCell;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rtrb::{Consumer, Producer, RingBuffer};

use crate::error::CaptureError;

/// Default number of events one thread's ring holds before new ones are dropped.
pub const DEFAULT_QUEUE_CAPACITY: usize = 65_536;

/// Longest time written lines stay in the writer's buffer.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

const BUFFER_BYTES: usize = 64 * 1024;

/// How long the writer thread sleeps between polls of the rings while events flow.
const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// Empty polls in a row after which the writer thread blocks until the next event.
const IDLE_POLLS: u32 = 20;

/// The writer thread's first wait after it says it is sleeping (see `run`).
const NAP: Duration = Duration::from_millis(10);

/// While the writer is held ([`Writer::hold`]), a ring holding this fraction of its capacity
/// is drained at once (with every other ring), so that holding never makes a ring overflow.
const HOLD_FRACTION: usize = 16;

/// While the writer is held, items wait at most this long in the rings before they are
/// written and flushed: a process killed inside a long captured step keeps what it recorded
/// up to then, as when nothing is held.
const HOLD_LIMIT: Duration = Duration::from_millis(50);

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
    /// What the writer thread keeps between items of one writer (e.g. which host allocations
    /// are live, so a free is written only after its alloc).
    type State: Default;
    /// Append the line, without its `\n`, to `out` (lines, `\n` between them, where one item
    /// stands for several); leave `out` empty to write nothing.
    fn encode(&self, out: &mut Vec<u8>, state: &mut Self::State);

    /// Called on the writer thread once for an item it leaves in its ring while the writer is
    /// held ([`Writer::hold`]), within a poll interval of its push: take now any reading
    /// that belongs to the item's time and would be stale when it is encoded later.
    fn sample(&mut self, _state: &mut Self::State) {}

    /// Called on the writer thread after each pass over every ring ([`Rings::drain`]): items
    /// of different threads' rings are seen ring by ring, so an item may come a pass before
    /// one it depends on that another thread pushed earlier (never two passes).
    fn pass_done(_state: &mut Self::State) {}

    /// How many lines beyond one the last [`encode`](Encode::encode) wrote (an item may stand
    /// for several lines: `\n` between them); asked once after each item that wrote any.
    fn extra_lines(_state: &mut Self::State) -> u64 {
        0
    }

    /// This thread's rings for writers of this type: `local_rings!(Self);` in each impl.
    fn local_rings() -> &'static std::thread::LocalKey<LocalRings<Self>>
    where
        Self: Sized;
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

/// What producers and `flush()`/`finish()` tell the writer thread, besides the items
/// themselves (those go through the rings).
enum Msg {
    /// Events were added while the thread was asleep.
    Wake,
    /// Write everything pushed so far, flush, then answer.
    Flush(mpsc::Sender<()>),
    /// Write everything pushed so far, the trailer, flush and stop.
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
    /// Set by the owner before `finish` (the trace's `capture_sources` line): written after
    /// every item and before the trailer, never dropped for a full ring.
    pub(crate) closing: Arc<Mutex<Option<Vec<u8>>>>,
    /// Called once at the end with the number of dropped items; returns a last line, if any.
    pub(crate) trailer: fn(dropped: u64, written: u64) -> Option<Vec<u8>>,
}

struct ThreadEnd {
    outputs: Vec<Output>,
    error: Option<(String, io::Error)>,
}

/// The producer half of one thread's ring for one writer, kept in that thread's
/// [`LocalRings`] for the writer's item type.
pub(crate) struct ThreadRing<T> {
    writer: u64,
    producer: Producer<T>,
}

/// One thread's rings for the writers of one item type, one per writer it has pushed to
/// (usually one). Each [`Encode`] type has its own thread-local list
/// ([`Encode::local_rings`], declared with [`local_rings!`]), so a push finds its ring by the
/// writer's id alone: one list of boxed `dyn Any` rings cost a push three indirect calls and a
/// 16-byte `TypeId` comparison, the largest part of `send` in a profile of the span path.
pub(crate) type LocalRings<T> = RefCell<Vec<ThreadRing<T>>>;

/// The body of [`Encode::local_rings`] for `$t`: its own thread-local [`LocalRings`].
macro_rules! local_rings {
    ($t:ty) => {
        fn local_rings() -> &'static std::thread::LocalKey<$crate::writer::LocalRings<$t>> {
            std::thread_local! {
                static RINGS: $crate::writer::LocalRings<$t> =
                    const { std::cell::RefCell::new(Vec::new()) };
            }
            &RINGS
        }
    };
}
pub(crate) use local_rings;

/// What the producers and the writer thread share. Producers read the first cache line on
/// every push; the writer thread writes `counters` on every line, so they live apart (sharing
/// one line made `closed`'s load cost more than the rest of a span).
#[repr(C)]
struct Shared<T> {
    /// Distinguishes this writer's ring in a thread's [`LocalRings`].
    id: u64,
    /// Most items one thread's ring holds before new ones are dropped.
    capacity: usize,
    /// The writer thread is (about to be) blocked on the control channel: the next push must
    /// wake it.
    sleeping: AtomicBool,
    /// `finish()` or drop has begun: pushes are discarded.
    closed: AtomicBool,
    /// The owner is in a region it measures: the writer thread leaves items in the rings (see
    /// [`Writer::hold`]).
    held: AtomicBool,
    /// Consumer halves of rings that threads made since the writer thread last looked.
    new_rings: Mutex<Vec<Consumer<T>>>,
    counters: Padded<Counters>,
}

/// Starts on a cache-line pair of its own.
#[repr(align(128))]
#[derive(Debug, Default)]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The writer thread's side: every thread's ring, drained in turn.
struct Rings<T> {
    consumers: Vec<HeldRing<T>>,
    /// When the writer first left items in a ring because the writer is held (see
    /// [`Writer::hold`]); `None` when it holds none.
    holding_since: Option<Instant>,
}

/// One thread's ring on the writer thread's side.
struct HeldRing<T> {
    ring: Consumer<T>,
    /// Items at the front of the ring already passed to [`Encode::sample`] and left there.
    sampled: usize,
}

impl<T: Encode> Rings<T> {
    fn new() -> Self {
        Rings {
            consumers: Vec::new(),
            holding_since: None,
        }
    }

    /// Take the consumer halves of rings that threads made since the last look.
    ///
    /// The list is taken out and the lock let go before anything allocates: growing
    /// `consumers` frees its old block, a free the allocator may hand to the recorder from
    /// this thread, whose first event makes a ring, which takes this lock. Held across the
    /// growth, the lock deadlocked the writer, and then every thread freeing a host block.
    fn adopt(&mut self, shared: &Shared<T>) {
        let new = std::mem::take(
            &mut *shared
                .new_rings
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        self.consumers
            .extend(new.into_iter().map(|ring| HeldRing { ring, sampled: 0 }));
    }

    /// Pass every item waiting in any ring to `each`, oldest first within each ring; forget
    /// the rings of threads that have ended once they are empty. Returns how many there were.
    fn drain(&mut self, shared: &Shared<T>, s: &mut State<'_>, encoder: &mut T::State) -> usize {
        self.adopt(shared);
        self.holding_since = None;
        let mut n = 0;
        self.consumers.retain_mut(|held| {
            let ring = &mut held.ring;
            held.sampled = 0;
            let slots = ring.slots();
            if slots > 0 {
                if let Ok(chunk) = ring.read_chunk(slots) {
                    n += slots;
                    chunk
                        .into_iter()
                        .for_each(|item| s.write_item(item, encoder));
                }
            }
            // The producer is dropped with its thread; what it pushed before is taken above.
            !(ring.is_abandoned() && ring.is_empty())
        });
        T::pass_done(encoder);
        n
    }

    /// One look at the rings while events flow: drain them (as [`drain`](Rings::drain)) unless
    /// the writer is held, a ring is not yet [`HOLD_FRACTION`] full and the oldest item left
    /// has waited less than [`HOLD_LIMIT`]. Items left in the rings are
    /// [sampled](Encode::sample) once, when first seen; items drained because they had waited
    /// [`HOLD_LIMIT`] are flushed at once. Returns how many items there were.
    fn poll(&mut self, shared: &Shared<T>, s: &mut State<'_>, encoder: &mut T::State) -> usize {
        self.adopt(shared);
        let limit = (shared.capacity / HOLD_FRACTION).max(1);
        let held = shared.held.load(Ordering::Acquire);
        let too_full = self.consumers.iter().any(|h| h.ring.slots() >= limit);
        let waited = self
            .holding_since
            .is_some_and(|since| since.elapsed() >= HOLD_LIMIT);
        if !held || too_full || waited {
            let n = self.drain(shared, s, encoder);
            if held && waited {
                s.flush();
            }
            return n;
        }
        let mut n = 0;
        for held in &mut self.consumers {
            let slots = held.ring.slots();
            n += slots;
            if slots <= held.sampled {
                continue;
            }
            if let Ok(mut chunk) = held.ring.read_chunk(slots) {
                // Not committed: the items stay in the ring for the drain.
                let (first, second) = chunk.as_mut_slices();
                first
                    .iter_mut()
                    .chain(second.iter_mut())
                    .skip(held.sampled)
                    .for_each(|item| item.sample(encoder));
                held.sampled = slots;
            }
        }
        if n > 0 && self.holding_since.is_none() {
            self.holding_since = Some(Instant::now());
        }
        n
    }
}

/// The producer side of a background writer.
///
/// Each thread that pushes gets its own single-producer ring ([`rtrb`]) for this writer, kept
/// in a thread-local; the writer thread drains every ring each millisecond while events flow
/// (unless it is [held](Writer::hold)).
/// A push is a write into the ring's slot and a release store of its tail: no atomic
/// read-modify-write and no cache line that another thread writes, where one shared queue made
/// every event move a line between the producer's and the writer's cores. Within a thread,
/// events reach the file in the order they were pushed; events of different threads are
/// interleaved ring by ring, and readers assemble spans by id, so order across threads does not
/// matter.
pub(crate) struct Writer<T: Encode> {
    shared: Arc<Shared<T>>,
    control: SyncSender<Msg>,
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
    /// Open every target and start the writer thread. `capacity` is per thread: how many of
    /// one thread's events may wait for the writer thread.
    pub(crate) fn spawn(
        targets: Vec<Target>,
        capacity: usize,
        framing: Framing,
        thread_name: &str,
    ) -> Result<Self, CaptureError>
    where
        T::State: Send + 'static,
    {
        Self::spawn_with(targets, capacity, framing, thread_name, T::State::default())
    }

    /// [`spawn`](Writer::spawn) with the writer thread's encoder state set to `state`.
    pub(crate) fn spawn_with(
        targets: Vec<Target>,
        capacity: usize,
        framing: Framing,
        thread_name: &str,
        state: T::State,
    ) -> Result<Self, CaptureError>
    where
        T::State: Send + 'static,
    {
        let outputs = targets
            .into_iter()
            .map(Output::open)
            .collect::<Result<Vec<_>, _>>()?;
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        let shared = Arc::new(Shared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            capacity: capacity.max(1),
            sleeping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            held: AtomicBool::new(false),
            new_rings: Mutex::new(Vec::new()),
            counters: Padded::default(),
        });
        // Only wake-ups and flush/shutdown requests travel here; a full channel means the
        // thread has messages to wake it already.
        let (control, rx) = mpsc::sync_channel(64);
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(thread_name.to_string())
            .spawn(move || run(rx, outputs, framing, &thread_shared, state))
            .map_err(|source| CaptureError::Write {
                target: String::from("writer thread"),
                bytes_written: 0,
                source,
            })?;
        Ok(Writer {
            shared,
            control,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queue one item; never blocks. When this thread's ring is full the item is dropped and
    /// counted; after the writer has finished, items are discarded.
    #[inline(always)]
    pub(crate) fn send(&self, item: T) {
        self.send_with(|| item);
    }

    /// [`send`](Writer::send) the item that `make` returns, made only once this thread's ring
    /// is at hand, so that it is written straight into its slot: an item built by the caller
    /// and handed over in memory is copied with loads wider than the stores that built it,
    /// which the processor cannot forward (a stall that cost about a tenth of a span). `make`
    /// must not allocate: it runs while the ring table is borrowed.
    #[inline(always)]
    pub(crate) fn send_with(&self, make: impl FnOnce() -> T) {
        let shared = &*self.shared;
        if shared.closed.load(Ordering::Relaxed) {
            return;
        }
        let pushed = self
            .with_ring(|producer| producer.push(make()).is_ok())
            .unwrap_or(false);
        if !pushed {
            shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // A push that races with the writer thread going to sleep may miss `sleeping`; the
        // thread's first wait is short (`NAP`) and it looks at the rings again after it.
        if shared.sleeping.load(Ordering::Relaxed) {
            self.wake();
        }
    }

    /// [`send`](Writer::send) an item that stands for `events` events (an inference forward
    /// call's module spans, one line each): when this thread's ring is full they are all
    /// counted as dropped.
    pub(crate) fn send_counted(&self, item: T, events: u64) {
        let shared = &*self.shared;
        if shared.closed.load(Ordering::Relaxed) {
            return;
        }
        let pushed = self
            .with_ring(|producer| producer.push(item).is_ok())
            .unwrap_or(false);
        if !pushed {
            shared.counters.dropped.fetch_add(events, Ordering::Relaxed);
            return;
        }
        if shared.sleeping.load(Ordering::Relaxed) {
            self.wake();
        }
    }

    /// Wake the writer thread, unless another push already did.
    #[cold]
    #[inline(never)]
    fn wake(&self) {
        if self.shared.sleeping.swap(false, Ordering::AcqRel) {
            let _ = self.control.try_send(Msg::Wake);
        }
    }

    /// Make this thread's ring now if it has none, so that its first event does not pay for
    /// it (a recorder makes the ring of the thread that builds it, usually the one that
    /// records: the ring is `capacity` slots, allocated at once).
    pub(crate) fn make_ring(&self) {
        let _ = self.with_ring(|_| ());
    }

    /// `f` on this thread's ring for this writer, made when it has none; `None` during thread
    /// teardown or when pushing re-entered itself.
    #[inline(always)]
    fn with_ring<R>(&self, f: impl FnOnce(&mut Producer<T>) -> R) -> Option<R> {
        let id = self.shared.id;
        T::local_rings()
            .try_with(|rings| {
                // Only fails if pushing re-entered itself (an allocator hook recording from
                // inside a push): drop the inner event rather than panic.
                let mut rings = rings.try_borrow_mut().ok()?;
                let ring = match rings.iter().position(|r| r.writer == id) {
                    Some(i) => &mut rings[i],
                    None => self.new_ring(&mut rings)?,
                };
                Some(f(&mut ring.producer))
            })
            // During thread teardown the thread-local is gone.
            .ok()
            .flatten()
    }

    /// A thread's first event for this writer: make its ring. Rings of finished writers go
    /// now, so a thread outliving many recorders keeps only live ones. Quietly: the ring is
    /// the recorder's memory, not the program's, and the allocator must not record into a
    /// ring table being changed.
    #[cold]
    #[inline(never)]
    fn new_ring<'a>(&self, rings: &'a mut Vec<ThreadRing<T>>) -> Option<&'a mut ThreadRing<T>> {
        let shared = &*self.shared;
        crate::alloc::quietly(|| {
            rings.retain(|r| !r.producer.is_abandoned());
            let (producer, consumer) = RingBuffer::new(shared.capacity);
            shared
                .new_rings
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(consumer);
            rings.push(ThreadRing {
                writer: shared.id,
                producer,
            });
        });
        rings.last_mut()
    }

    /// While `on`, the writer thread takes items out of the rings only when one is
    /// [`HOLD_FRACTION`] full, when the oldest has waited [`HOLD_LIMIT`], or on `flush` and
    /// `finish`, so that the encoding of lines does not compete with the region being measured
    /// (on a machine with few cores it takes time from the program's own threads). Items it
    /// leaves are [sampled](Encode::sample) when first seen. Never blocks.
    pub(crate) fn hold(&self, on: bool) {
        self.shared.held.store(on, Ordering::Release);
    }

    /// Count an item its producer could not queue (it is reported with the ring's drops).
    pub(crate) fn dropped_one(&self) {
        self.shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Items dropped so far because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.shared.counters.dropped.load(Ordering::Relaxed)
    }

    /// Block until everything queued before this call is handed to the output (and flushed
    /// out of the buffer), or `timeout` passes. True when the flush was confirmed.
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        let (ack_tx, ack_rx) = mpsc::channel();
        let deadline = Instant::now() + timeout;
        // A blocking send only waits for the writer thread to make room, and fails at once if
        // the thread is gone.
        if self.control.send(Msg::Flush(ack_tx)).is_err() {
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
        self.shared.closed.store(true, Ordering::Relaxed);
        // Fails only when the thread is already gone (it panicked); join reports that.
        let _ = self.control.send(Msg::Shutdown);
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
        let counters = &self.shared.counters;
        let bytes_written = counters.bytes.load(Ordering::Relaxed);
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
            events_written: counters.written.load(Ordering::Relaxed),
            events_dropped: counters.dropped.load(Ordering::Relaxed),
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
    /// Write `line`, which holds `lines` lines (the last without its `\n`), and count them.
    fn write_line(&mut self, lines: u64) {
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

    fn write_item<T: Encode>(&mut self, item: T, state: &mut T::State) {
        item.encode(&mut self.line, state);
        if !self.line.is_empty() {
            self.write_line(1 + T::extra_lines(state));
        }
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
    rx: Receiver<Msg>,
    outputs: Vec<Output>,
    framing: Framing,
    shared: &Shared<T>,
    mut encoder: T::State,
) -> ThreadEnd {
    let counters = &shared.counters;
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
        s.write_line(1);
        // The header is on disk before any event: a reader can identify the file at once.
        s.flush();
    }
    let mut rings = Rings::new();
    // Acts on one control message; false on `Shutdown`.
    macro_rules! control {
        ($msg:expr) => {
            match $msg {
                Msg::Wake => true,
                Msg::Flush(ack) => {
                    rings.drain(shared, &mut s, &mut encoder);
                    s.flush();
                    let _ = ack.send(());
                    true
                }
                Msg::Shutdown => false,
            }
        };
    }
    // Polling while events flow: a producer never has a sleeping thread to wake (a futex call
    // costing more than the span itself). After `IDLE_POLLS` empty polls the thread says it is
    // sleeping, looks at the rings once more, and blocks on the control channel until a push
    // wakes it (or the next flush is due), so an idle recorder costs nothing.
    let mut idle_polls = 0u32;
    'run: loop {
        loop {
            match rx.try_recv() {
                Ok(msg) => {
                    if !control!(msg) {
                        break 'run;
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => break 'run,
            }
        }
        let received = rings.poll(shared, &mut s, &mut encoder);
        s.flush_if_due();
        if received > 0 {
            idle_polls = 0;
        } else {
            idle_polls += 1;
        }
        if idle_polls < IDLE_POLLS {
            // Waiting on the control channel rather than sleeping: a `flush` (or `finish`) is
            // answered at once, not at the end of the poll interval.
            match rx.recv_timeout(POLL_INTERVAL) {
                Ok(msg) => {
                    if !control!(msg) {
                        break 'run;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break 'run,
            }
            continue;
        }
        shared.sleeping.store(true, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        // A producer that pushed while the store above was on its way may not have seen it and
        // will not wake us. The first wait is therefore short: the drain after it takes such an
        // event. Any push after that sees `sleeping` (or finds it already cleared by a push that
        // sent `Wake`).
        let mut waits = 0u32;
        let msg = loop {
            if rings.poll(shared, &mut s, &mut encoder) > 0 {
                break None;
            }
            s.flush_if_due();
            let flush_due = s
                .dirty
                .then(|| FLUSH_INTERVAL.saturating_sub(s.last_flush.elapsed()));
            let wait = if waits == 0 {
                Some(flush_due.map_or(NAP, |due| due.min(NAP)))
            } else {
                flush_due
            };
            waits += 1;
            let Some(wait) = wait else {
                match rx.recv() {
                    Ok(msg) => break Some(msg),
                    Err(_) => break 'run,
                }
            };
            match rx.recv_timeout(wait) {
                Ok(msg) => break Some(msg),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break 'run,
            }
        };
        shared.sleeping.store(false, Ordering::Relaxed);
        idle_polls = 0;
        if let Some(msg) = msg {
            if !control!(msg) {
                break;
            }
        }
    }
    // Everything pushed before `closed` was set (and possibly a little after) is written.
    rings.drain(shared, &mut s, &mut encoder);
    let closing = framing
        .closing
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    if let Some(closing) = closing {
        s.line = closing;
        s.write_line(1);
    }
    let dropped = counters.dropped.load(Ordering::Relaxed);
    let written = counters.written.load(Ordering::Relaxed);
    if let Some(trailer) = (framing.trailer)(dropped, written) {
        s.line = trailer;
        s.write_line(1);
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
        type State = ();
        local_rings!(Text);
        fn encode(&self, out: &mut Vec<u8>, _: &mut ()) {
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
                closing: Default::default(),
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
                closing: Default::default(),
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

    fn spawn_plain<T: Encode<State: Send>>(out: &Shared, capacity: usize) -> Writer<T> {
        Writer::spawn(
            vec![Target::Writer(Box::new(out.clone()))],
            capacity,
            Framing {
                closing: Default::default(),
                header: None,
                trailer: no_trailer,
            },
            "test-writer",
        )
        .unwrap()
    }

    #[test]
    fn a_push_wakes_a_sleeping_writer() {
        let out = Shared::default();
        let w = spawn_plain(&out, 16);
        // 20 empty polls and the short first wait, then the thread blocks.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !w.shared.sleeping.load(Ordering::Relaxed) {
            assert!(
                Instant::now() < deadline,
                "the writer thread never went to sleep"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(NAP * 3);
        w.send(Text("late"));
        // Without the wake-up the line would wait for the next push or `finish()`; no flush
        // is asked for here, so only the thread's own flush can bring it out.
        let deadline = Instant::now() + Duration::from_secs(10);
        while out.0.lock().unwrap().as_slice() != b"late\n" {
            assert!(
                Instant::now() < deadline,
                "the line never reached the output"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        w.finish().unwrap();
    }

    #[test]
    fn each_thread_keeps_its_order_and_its_own_capacity() {
        // The writer thread is stuck in its first write until the gate opens: nothing is
        // drained, so each thread's ring fills to the capacity and the rest is dropped.
        #[derive(Clone)]
        struct Gate(Arc<(Mutex<bool>, std::sync::Condvar)>, Shared);
        impl Write for Gate {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                let (open, cv) = &*self.0;
                let mut open = open.lock().unwrap();
                while !*open {
                    open = cv.wait(open).unwrap();
                }
                self.1.write(buf)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let gate = Gate(Arc::default(), Shared::default());
        const CAPACITY: usize = 100;
        let w = Writer::spawn(
            vec![Target::Writer(Box::new(gate.clone()))],
            CAPACITY,
            Framing {
                closing: Default::default(),
                header: Some(b"head".to_vec()),
                trailer: |dropped, written| Some(format!("tail {dropped} {written}").into_bytes()),
            },
            "test-writer",
        )
        .unwrap();
        const NAMES: [[&str; 3]; 3] = [["a0", "a1", "a2"], ["b0", "b1", "b2"], ["c0", "c1", "c2"]];
        std::thread::scope(|scope| {
            for names in NAMES {
                let w = &w;
                scope.spawn(move || {
                    // The first CAPACITY pushes are kept: the three names, then fillers.
                    for i in 0..CAPACITY + 7 {
                        w.send(Text(names.get(i).copied().unwrap_or("x")));
                    }
                });
            }
        });
        assert_eq!(w.dropped(), 3 * 7);
        *gate.0 .0.lock().unwrap() = true;
        gate.0 .1.notify_all();
        let report = w.finish().unwrap();
        assert_eq!(report.events_dropped, 21);
        let text = String::from_utf8(gate.1 .0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.first(), Some(&"head"));
        assert_eq!(
            lines.last(),
            Some(&format!("tail 21 {}", 1 + 3 * CAPACITY).as_str())
        );
        assert_eq!(lines.len(), 2 + 3 * CAPACITY);
        for names in NAMES {
            let at: Vec<usize> = names
                .iter()
                .map(|n| lines.iter().position(|l| l == n).unwrap())
                .collect();
            assert!(at[0] < at[1] && at[1] < at[2], "{names:?} at {at:?}");
        }
    }

    #[test]
    fn the_ring_of_an_ended_thread_is_written_then_forgotten() {
        let out = Shared::default();
        let w = spawn_plain(&out, 16);
        std::thread::scope(|scope| {
            scope.spawn(|| w.send(Text("from a thread that ends")));
        });
        assert!(w.flush(Duration::from_secs(5)));
        assert_eq!(
            out.0.lock().unwrap().as_slice(),
            b"from a thread that ends\n"
        );
        // The drain after the flush finds the ring abandoned and empty.
        w.send(Text("main"));
        assert!(w.flush(Duration::from_secs(5)));
        w.finish().unwrap();
        assert_eq!(
            out.0.lock().unwrap().as_slice(),
            b"from a thread that ends\nmain\n"
        );
    }

    #[test]
    fn a_thread_outliving_writers_keeps_only_live_rings() {
        let out = Shared::default();
        for _ in 0..5 {
            let w = spawn_plain(&out, 4);
            w.send(Text("x"));
            w.finish().unwrap();
        }
        let w = spawn_plain(&out, 4);
        w.send(Text("y"));
        // The finished writers' rings went when this one's ring was made.
        assert_eq!(Text::local_rings().with(|r| r.borrow().len()), 1);
        w.finish().unwrap();
        assert_eq!(out.0.lock().unwrap().as_slice(), b"x\nx\nx\nx\nx\ny\n");
    }

    /// A line that says whether it was sampled; the state counts the samples.
    struct Sampled(&'static str, bool);
    impl Encode for Sampled {
        type State = u32;
        local_rings!(Sampled);
        fn encode(&self, out: &mut Vec<u8>, _: &mut u32) {
            out.extend_from_slice(self.0.as_bytes());
            if self.1 {
                out.push(b'+');
            }
        }
        fn sample(&mut self, samples: &mut u32) {
            self.1 = true;
            *samples += 1;
        }
    }

    #[test]
    fn held_rings_keep_their_items_sampled_once_until_full_released_or_late() {
        let shared = super::Shared::<Sampled> {
            id: u64::MAX,
            capacity: 4 * HOLD_FRACTION,
            sleeping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            held: AtomicBool::new(true),
            new_rings: Mutex::new(Vec::new()),
            counters: Padded::default(),
        };
        let (mut producer, consumer) = RingBuffer::new(shared.capacity);
        shared.new_rings.lock().unwrap().push(consumer);
        let out = Shared::default();
        let mut s = State {
            outputs: vec![Output::Writer(BufWriter::new(Box::new(out.clone())))],
            error: None,
            counters: &shared.counters,
            line: Vec::new(),
            dirty: false,
            last_flush: Instant::now(),
        };
        let written = |s: &mut State<'_>| {
            s.flush();
            String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
        };
        let mut samples = 0u32;
        let mut rings = Rings::new();
        let mut push = |name| {
            if producer.push(Sampled(name, false)).is_err() {
                panic!("the test ring is full");
            }
        };
        // Held: seen and sampled, left in the ring; a second look samples nothing again.
        push("a");
        push("b");
        assert_eq!(rings.poll(&shared, &mut s, &mut samples), 2);
        assert_eq!(rings.poll(&shared, &mut s, &mut samples), 2);
        assert_eq!(samples, 2);
        push("c");
        assert_eq!(rings.poll(&shared, &mut s, &mut samples), 3);
        assert_eq!(samples, 3);
        assert_eq!(written(&mut s), "");
        // A quarter of the capacity / HOLD_FRACTION reached: everything is drained, in order.
        push("d");
        assert_eq!(rings.poll(&shared, &mut s, &mut samples), 4);
        assert_eq!(written(&mut s), "a+\nb+\nc+\nd\n");
        // Items held longer than the limit are drained and flushed by the poll itself.
        push("e");
        assert_eq!(rings.poll(&shared, &mut s, &mut samples), 1);
        assert_eq!(written(&mut s), "a+\nb+\nc+\nd\n");
        rings.holding_since = Instant::now().checked_sub(HOLD_LIMIT);
        assert!(rings.holding_since.is_some());
        assert_eq!(rings.poll(&shared, &mut s, &mut samples), 1);
        assert!(!s.dirty, "flushed at once");
        assert_eq!(out.0.lock().unwrap().as_slice(), b"a+\nb+\nc+\nd\ne+\n");
        // Released: drained at the next look; a forced drain ignores the hold.
        push("f");
        assert_eq!(rings.poll(&shared, &mut s, &mut samples), 1);
        shared.held.store(false, Ordering::Relaxed);
        assert_eq!(rings.poll(&shared, &mut s, &mut samples), 1);
        shared.held.store(true, Ordering::Relaxed);
        push("g");
        assert_eq!(rings.drain(&shared, &mut s, &mut samples), 1);
        assert_eq!(samples, 5);
        assert_eq!(written(&mut s), "a+\nb+\nc+\nd\ne+\nf+\ng\n");
    }

    #[test]
    fn a_held_writer_still_writes_everything() {
        let out = Shared::default();
        let w: Writer<Sampled> = spawn_plain(&out, 1024);
        w.hold(true);
        w.send(Sampled("x", false));
        // `flush` drains what is held.
        assert!(w.flush(Duration::from_secs(5)));
        assert!(out.0.lock().unwrap().starts_with(b"x"));
        w.send(Sampled("y", false));
        w.finish().unwrap();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().map(|l| l.trim_end_matches('+')).collect();
        assert_eq!(lines, ["x", "y"]);
    }

    #[test]
    fn temporary_path_appends_tmp() {
        assert_eq!(
            temporary_path(Path::new("/a/trace.jsonl")),
            PathBuf::from("/a/trace.jsonl.tmp")
        );
    }
}
