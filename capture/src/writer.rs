//! The background writer shared by the trace recorder and the inference profiler.
//!
//! Each producing thread pushes items into a single-producer ring of its own; it never waits
//! for I/O or for another thread: when its ring already holds the queue capacity the item is
//! dropped and counted. One background thread owns the outputs; on Linux it runs as a
//! `SCHED_BATCH` job, so its wake-ups do not preempt the recording threads. While events
//! arrive it drains every ring each 10 ms (each millisecond while the writer is held and for
//! 100 ms after) and encodes each item, one whole JSON line after another, straight into one
//! 64 KiB buffer that goes to every output when full and at each flush. After 20 empty polls
//! it marks itself sleeping and blocks until a push wakes it, so an idle recorder costs
//! nothing. It flushes at least every 100 ms while there is unflushed data, on request, and
//! when the writer is finished or dropped.
//!
//! While the owner measures a region (a recorder's captured step) the writer is *held*
//! (`Writer::hold`): each millisecond the thread only looks at the rings and lets each new
//! item take the readings that belong to its time (`Encode::sample`: a host checkpoint's
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
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rtrb::{Consumer, Producer, RingBuffer};

use crate::error::CaptureError;

mod output;
mod rings;
mod thread;

pub use output::temporary_path;
use output::Output;
pub(crate) use output::Target;
use rings::Shared;
use thread::run;

/// Default number of events one thread's ring holds before new ones are dropped.
pub const DEFAULT_QUEUE_CAPACITY: usize = 65_536;

/// Longest time written lines stay in the writer's buffer.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// The lines the writer thread gathers before it hands them to the outputs.
const BUFFER_BYTES: usize = 64 * 1024;

/// How long the writer thread sleeps between polls of the rings while events flow. Each wake-up
/// costs the recording threads more than the items it drains (a switch that preempts one of
/// them on a busy machine, its caches refilled): at 10 ms rather than 1 the captured batched
/// serving rounds' CPU overhead fell from about +27% to +19% (BENCHMARKS.md, one-offs). A
/// ring of the default capacity then takes 6.5 million items a second from its thread
/// without a drop.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The poll interval while the writer is held ([`Writer::hold`]), or was within
/// [`HELD_RECENTLY`]: each new item takes its readings (`Encode::sample`) at the poll that
/// first sees it, so they are at most this late. A hold that begins while the thread waits
/// out the longer interval wakes it.
const HELD_POLL_INTERVAL: Duration = Duration::from_millis(1);

/// How long after the writer was last seen held it still polls every [`HELD_POLL_INTERVAL`]:
/// a training loop holds it for each step and releases it between steps.
const HELD_RECENTLY: Duration = Duration::from_millis(100);

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

    /// Whether written items go back to the thread that sent them, to be dropped at its next
    /// push ([`ThreadRing::written`]): for items that own blocks the sending thread allocated
    /// (a serving thread's forward calls), not for those pushed from inside the allocator.
    const GIVE_BACK: bool = false;
}

/// Whether `T`'s written items go back to their thread.
const fn gives_back<T: Encode>() -> bool {
    T::GIVE_BACK && std::mem::needs_drop::<T>()
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
    /// The items the writer thread has written, handed back to be dropped on this thread,
    /// which made them (`None` unless [`Encode::GIVE_BACK`]). Dropped on the writer thread, an
    /// item's blocks go back to this thread's allocator arena through its lock, and the
    /// arena's trimming (`madvise`) costs this thread page faults. What comes back after the
    /// thread's last push waits for its next push, or its end.
    written: Option<Consumer<T>>,
}

/// Most written items a push drops (the rest wait for the next pushes), so that no push
/// drops a long backlog at once.
const DROPS_PER_PUSH: usize = 16;

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
        let shared = Arc::new(Shared::new(
            NEXT_ID.fetch_add(1, Ordering::Relaxed),
            capacity.max(1),
        ));
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
            .with_ring(|ring| ring.producer.push(make()).is_ok())
            .unwrap_or(false);
        self.drop_written();
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

    /// Drop items the writer thread has handed back ([`ThreadRing::written`]), one at a time
    /// outside the ring table's borrow: a drop frees, and the allocator's hook may record.
    #[inline(always)]
    fn drop_written(&self) {
        if !gives_back::<T>() {
            return;
        }
        for _ in 0..DROPS_PER_PUSH {
            let item = self
                .with_ring(|ring| ring.written.as_mut().and_then(|w| w.pop().ok()))
                .flatten();
            match item {
                Some(item) => drop(item),
                None => break,
            }
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
            .with_ring(|ring| ring.producer.push(item).is_ok())
            .unwrap_or(false);
        self.drop_written();
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
    fn with_ring<R>(&self, f: impl FnOnce(&mut ThreadRing<T>) -> R) -> Option<R> {
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
                Some(f(ring))
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
            let (back, written) = if gives_back::<T>() {
                let (back, written) = RingBuffer::new(shared.capacity);
                (Some(back), Some(written))
            } else {
                (None, None)
            };
            shared
                .new_rings
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push((consumer, back));
            rings.push(ThreadRing {
                writer: shared.id,
                producer,
                written,
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
        let shared = &*self.shared;
        shared.held.store(on, Ordering::SeqCst);
        // The thread either sees the hold before it waits the longer interval, or has said it
        // waits it and is woken here (both sides sequentially consistent).
        if on
            && shared.polling_slowly.load(Ordering::SeqCst)
            && shared.polling_slowly.swap(false, Ordering::SeqCst)
        {
            let _ = self.control.try_send(Msg::Wake);
        }
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

#[cfg(test)]
mod tests {
    use super::output::State;
    use super::rings::Rings;
    use super::*;
    use std::io::Write;
    use std::path::Path;

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

    /// An item that records which thread drops it.
    struct Owned(&'static str, Arc<Mutex<Vec<std::thread::ThreadId>>>);
    impl Encode for Owned {
        type State = ();
        local_rings!(Owned);
        const GIVE_BACK: bool = true;
        fn encode(&self, out: &mut Vec<u8>, _: &mut ()) {
            out.extend_from_slice(self.0.as_bytes());
        }
    }
    impl Drop for Owned {
        fn drop(&mut self) {
            self.1.lock().unwrap().push(std::thread::current().id());
        }
    }

    #[test]
    fn written_items_are_dropped_on_the_thread_that_sent_them() {
        let out = Shared::default();
        let w: Writer<Owned> = spawn_plain(&out, 16);
        let drops = Arc::new(Mutex::new(Vec::new()));
        let here = std::thread::current().id();
        w.send(Owned("a", Arc::clone(&drops)));
        w.send(Owned("b", Arc::clone(&drops)));
        w.flush(Duration::from_secs(10));
        assert!(drops.lock().unwrap().is_empty(), "written, not dropped yet");
        // The next push drops what was handed back, here.
        w.send(Owned("c", Arc::clone(&drops)));
        assert_eq!(*drops.lock().unwrap(), [here, here]);
        // A thread's items go back to that thread.
        std::thread::scope(|s| {
            s.spawn(|| {
                w.send(Owned("d", Arc::clone(&drops)));
                w.flush(Duration::from_secs(10));
                w.send(Owned("e", Arc::clone(&drops)));
                let there = std::thread::current().id();
                assert_eq!(drops.lock().unwrap()[2..], [there]);
            });
        });
        w.finish().unwrap();
        assert_eq!(
            String::from_utf8(out.0.lock().unwrap().clone()).unwrap(),
            "a\nb\nc\nd\ne\n"
        );
    }

    #[test]
    fn flush_waits_for_the_queue() {
        let out = Shared::default();
        let w = spawn_plain(&out, 16);
        w.send(Text("x"));
        assert!(w.flush(Duration::from_secs(5)));
        assert_eq!(out.0.lock().unwrap().as_slice(), b"x\n");
    }

    /// The writer thread runs as a batch job (`SCHED_BATCH`, policy 3 in `/proc`'s `sched`).
    /// glibc only: musl's `sched_setscheduler` does not set a thread's policy.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn the_writer_thread_is_a_batch_job() {
        let out = Shared::default();
        let w = spawn_named(&out, 16, "batch-writer");
        w.send(Text("x"));
        assert!(w.flush(Duration::from_secs(5)));
        let policies: Vec<String> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|task| {
                std::fs::read_to_string(task.path().join("comm"))
                    .is_ok_and(|comm| comm.trim_end() == "batch-writer")
            })
            .filter_map(|task| std::fs::read_to_string(task.path().join("sched")).ok())
            .filter_map(|sched| {
                sched
                    .lines()
                    .find(|line| line.starts_with("policy"))
                    .and_then(|line| line.split(':').nth(1))
                    .map(|policy| policy.trim().to_string())
            })
            .collect();
        w.finish().unwrap();
        assert_eq!(policies, ["3"]);
    }

    fn spawn_plain<T: Encode<State: Send>>(out: &Shared, capacity: usize) -> Writer<T> {
        spawn_named(out, capacity, "test-writer")
    }

    /// A writer to `out` with no header or trailer, its thread named `name`.
    fn spawn_named<T: Encode<State: Send>>(out: &Shared, capacity: usize, name: &str) -> Writer<T> {
        Writer::spawn(
            vec![Target::Writer(Box::new(out.clone()))],
            capacity,
            Framing {
                closing: Default::default(),
                header: None,
                trailer: no_trailer,
            },
            name,
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
        let shared = super::Shared::<Sampled>::new(u64::MAX, 4 * HOLD_FRACTION);
        shared.held.store(true, Ordering::Relaxed);
        let (mut producer, consumer) = RingBuffer::new(shared.capacity);
        shared.new_rings.lock().unwrap().push((consumer, None));
        let out = Shared::default();
        let mut s = State::new(
            vec![Output::Writer(Box::new(out.clone()))],
            &shared.counters,
        );
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
    fn the_writer_polls_often_while_held_and_for_a_while_after() {
        let shared = super::Shared::<Sampled>::new(u64::MAX, 16);
        let t0 = Instant::now();
        let mut held_at = None;
        // Never held: the long interval, said in `polling_slowly`.
        assert_eq!(
            thread::poll_interval(&shared, &mut held_at, t0),
            POLL_INTERVAL
        );
        assert!(shared.polling_slowly.load(Ordering::SeqCst));
        // Held: the short one, noted.
        shared.held.store(true, Ordering::SeqCst);
        assert_eq!(
            thread::poll_interval(&shared, &mut held_at, t0),
            HELD_POLL_INTERVAL
        );
        assert_eq!(held_at, Some(t0));
        assert!(!shared.polling_slowly.load(Ordering::SeqCst));
        // Released: short until HELD_RECENTLY has passed since the writer was last seen held.
        shared.held.store(false, Ordering::SeqCst);
        let just_before = t0 + HELD_RECENTLY - Duration::from_millis(1);
        assert_eq!(
            thread::poll_interval(&shared, &mut held_at, just_before),
            HELD_POLL_INTERVAL
        );
        assert_eq!(
            thread::poll_interval(&shared, &mut held_at, t0 + HELD_RECENTLY),
            POLL_INTERVAL
        );
    }

    #[test]
    fn a_hold_wakes_a_writer_polling_slowly() {
        let out = Shared::default();
        let w: Writer<Sampled> = spawn_plain(&out, 1024);
        // Items flowing, never held: the thread soon waits the long interval.
        w.send(Sampled("x", false));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !w.shared.polling_slowly.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the writer never polled slowly");
            std::thread::sleep(Duration::from_millis(1));
        }
        // The hold takes the flag (and sends the thread a wake-up); a release does not.
        w.hold(true);
        assert!(!w.shared.polling_slowly.load(Ordering::SeqCst));
        w.hold(false);
        w.finish().unwrap();
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
    fn outputs_get_whole_lines_a_buffer_at_a_time() {
        /// Keeps each `write` call's bytes apart.
        #[derive(Clone, Default)]
        struct Calls(Arc<Mutex<Vec<Vec<u8>>>>);
        impl Write for Calls {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().push(buf.to_vec());
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (a, b) = (Calls::default(), Calls::default());
        let counters = Counters::default();
        let mut s = State::new(
            vec![
                Output::Writer(Box::new(a.clone())),
                Output::Writer(Box::new(b.clone())),
            ],
            &counters,
        );
        // 99 bytes and its `\n`: a buffer's worth is 656 lines (65,600 bytes ≥ 64 KiB).
        let line: &'static str = Box::leak("x".repeat(99).into_boxed_str());
        for _ in 0..655 {
            s.write_item(&Text(line), &mut ());
        }
        assert!(
            a.0.lock().unwrap().is_empty(),
            "written before the buffer is full"
        );
        s.write_item(&Text(line), &mut ());
        s.write_item(&Text("last"), &mut ());
        s.flush();
        for calls in [&a, &b] {
            let calls = calls.0.lock().unwrap();
            let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
            assert_eq!(sizes, [65_600, 5]);
            assert!(calls.iter().all(|c| c.ends_with(b"\n")));
        }
        assert_eq!(counters.written.load(Ordering::Relaxed), 657);
        assert_eq!(counters.bytes.load(Ordering::Relaxed), 65_605);
    }

    #[test]
    fn temporary_path_appends_tmp() {
        assert_eq!(
            temporary_path(Path::new("/a/trace.jsonl")),
            PathBuf::from("/a/trace.jsonl.tmp")
        );
    }
}
